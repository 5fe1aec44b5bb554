"""Two ``driftloop serve`` on one PostgreSQL store: both ingest and answer status, exactly one is
the leader (``driftloop_daemon_leader``), and a follower takes over within 2 x
``server.leader_lease_seconds`` when the leader is killed (SIGKILL) or its database connection is
cut (``pg_terminate_backend``, the stand-in for a network partition)."""
from __future__ import annotations

import signal
import time

import httpx
import psycopg
import pytest

from monitor.daemon.runtime.leader import lock_key
from tests.faults.conftest import AUTH, TOKEN
from tests.faults.test_dependencies import prediction
from tests.monitor.daemon.test_serve import running_mlflow_runs, served  # noqa: F401  (fixture)
from tests.support.postgres import postgres_server  # noqa: F401  (fixture)
from tests.support.waiting import wait_until

LEASE = 2.0


def leader_gauge(daemon) -> float | None:
    try:
        text = httpx.get(daemon.url + "/metrics", timeout=2).text
    except httpx.HTTPError:
        return None
    line = next((row for row in text.splitlines() if row.startswith("driftloop_daemon_leader ")), None)
    return None if line is None else float(line.split()[1])


def leaders(daemons) -> list:
    return [d for d in daemons if leader_gauge(d) == 1.0]


def wait_for_one_leader(daemons, timeout: float) -> tuple[object, float]:
    started = time.monotonic()

    def one_leader() -> list:
        found = leaders(daemons)
        return found if len(found) == 1 else []

    [leader] = wait_until(one_leader, timeout, 0.1, lambda: f"no single leader: {[leader_gauge(d) for d in daemons]}")
    return leader, time.monotonic() - started


def leader_backend(port: int, model: str) -> int:
    with psycopg.connect(f"host=127.0.0.1 port={port} user=postgres dbname=postgres", autocommit=True) as conn:
        row = conn.execute("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = 0 "
                           "AND objid = %s", (lock_key(model),)).fetchone()
    assert row is not None, "nobody holds the leader lock"
    return row[0]


@pytest.mark.slow
def test_two_daemons_one_leader_and_failover(make_config, served, postgres_server):
    cfg = make_config({"store": {"url": postgres_server.create_database()},
                       "server": {"leader_lease_seconds": LEASE}}, with_champion=False)
    a = served(cfg, token=TOKEN).start("--check-interval", "3600")
    b = served(cfg, token=TOKEN).start("--check-interval", "3600")
    leader, _ = wait_for_one_leader([a, b], 2 * LEASE)
    assert leader is a  # the first one up
    assert leader_gauge(b) == 0.0
    # Both ingest; the follower sends alerts and retrains to the leader (503, retry).
    assert httpx.post(b.url + "/v1/predictions", json=[prediction(1)], headers=AUTH, timeout=30).status_code == 200
    r = httpx.post(b.url + "/v1/retrain", headers=AUTH, timeout=30)
    assert r.status_code == 503 and "follower" in r.json()["error"] and r.headers["retry-after"]
    assert httpx.get(b.url + "/v1/status", timeout=30).json()["daemon"]["leader"] is False

    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait(10)
    new, took = wait_for_one_leader([b], 2 * LEASE + 1)
    print(f"\nfail-over after SIGKILL: {took:.2f} s (lease {LEASE:g} s)")
    assert new is b and took <= 2 * LEASE

    c = served(cfg, token=TOKEN).start("--check-interval", "3600")
    assert (leader_gauge(c), leader_gauge(b)) == (0.0, 1.0), f"b:\n{b.log()[-3000:]}\nc:\n{c.log()[-3000:]}"
    # The partition stand-in: the leader's database session is terminated under it.
    with psycopg.connect(f"host=127.0.0.1 port={postgres_server.port} user=postgres dbname=postgres",
                         autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (leader_backend(postgres_server.port, cfg.model.name),))
    started = time.monotonic()
    saw_none = False

    def settled() -> bool:  # b must notice it lost the lock; someone holds it again
        nonlocal saw_none
        found = leaders([b, c])
        assert len(found) <= 1 or time.monotonic() - started < LEASE, "two leaders past half a lease"
        saw_none = saw_none or not found
        return len(found) == 1 and (found[0] is c or saw_none)

    wait_until(settled, 2 * LEASE + 1, 0.1, "leadership did not settle after the leader's connection was cut")
    took = time.monotonic() - started
    print(f"leadership settled {took:.2f} s after the leader's connection was cut")
    assert took <= 2 * LEASE
    final, _ = wait_for_one_leader([b, c], 1)
    time.sleep(LEASE)  # an interval under observation, not a synchronisation: it stays one
    assert leaders([b, c]) == [final]
    assert httpx.get(final.url + "/readyz", timeout=30).status_code == 200


def pg_rows(url: str, sql: str) -> list[tuple]:
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        return conn.execute(sql).fetchall()


@pytest.mark.slow
def test_leader_killed_mid_retrain_the_follower_settles_it_and_promotes_once(make_config, served, postgres_server):
    import json

    from monitor.store import PredictionStore
    from tests.monitor.daemon.conftest import Traffic

    url = postgres_server.create_database()
    cfg = make_config({"store": {"url": url}, "server": {"leader_lease_seconds": LEASE}})
    with PredictionStore.from_config(cfg) as store:
        Traffic(cfg, store).send(1500, 90, concept=1.0)
    a = served(cfg).start("--check-interval", "3600")  # the leader's first check runs a second after it leads
    b = served(cfg).start("--check-interval", "3600")
    wait_until(lambda: pg_rows(url, "SELECT id FROM retrain_attempts WHERE status = 'running' AND pid IS NOT NULL"),
               90, 0.2, a.log)
    [(attempt_id,)] = pg_rows(url, "SELECT id FROM retrain_attempts")
    assert leader_gauge(a) == 1.0 and leader_gauge(b) == 0.0
    wait_until(lambda: running_mlflow_runs(cfg), 120, 0.2, a.log)  # the child is training now
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait(10)
    _, took = wait_for_one_leader([b], 2 * LEASE + 1)
    assert took <= 2 * LEASE

    def promoted() -> bool:
        assert b.proc.poll() is None, b.log()
        return "promoted" in [s for _, s in pg_rows(url, "SELECT id, status FROM retrain_attempts")]

    wait_until(promoted, 300, 0.5, b.log)
    attempts = pg_rows(url, "SELECT id, status FROM retrain_attempts ORDER BY started_at")
    # Interrupted, not failed: retried at once by the new leader (monitor.daemon.retraining.failover).
    assert (attempts[0] == (attempt_id, "interrupted")
            and [s for _, s in attempts] == ["interrupted", "promoted"]), attempts
    from mlflow import MlflowClient
    tags = MlflowClient(tracking_uri=cfg.tracking_uri).get_registered_model(cfg.registered_model_name).tags
    history = json.loads(tags["driftloop.champion_history"])
    assert len(history) == 2 and history[0] == "1", history  # exactly one promotion
