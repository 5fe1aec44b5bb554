"""Fail-over that finishes the retrain: three ``driftloop serve`` on one PostgreSQL store and one
MLflow (SQLite), the default leader lease. The leader is killed (SIGKILL) while its retrain child
trains, and the next leader is killed right after its retry registered a challenger. The last one
standing must finish the job: exactly one promotion in the end, the interrupted attempts counted
neither as failures (no cooldown, though ``alerts.cooldown_seconds`` is an hour) nor toward
escalation (``alerts.max_attempts`` is 1), and every registry version the dead leaders left
carries an outcome or a ``driftloop.fate``."""
from __future__ import annotations

import json
import signal
import time

import pytest
from mlflow import MlflowClient

from monitor.daemon.retraining.failover import FATE_TAG, ORPHANED
from monitor.store import PredictionStore
from tests.faults.test_failover import pg_rows, wait_for_one_leader
from tests.monitor.daemon.conftest import Traffic
from tests.monitor.daemon.test_serve import running_mlflow_runs, served  # noqa: F401  (fixture)
from tests.support.postgres import postgres_server  # noqa: F401  (fixture)
from tests.support.waiting import wait_until

DEFAULT_LEASE = 10.0  # server.leader_lease_seconds's default: the fail-over time is measured at it


def statuses(url: str) -> list[tuple[str, str]]:
    return pg_rows(url, "SELECT id, status FROM retrain_attempts ORDER BY started_at")


def retrain_versions(cfg) -> list:
    client = MlflowClient(tracking_uri=cfg.tracking_uri)
    return [v for v in client.search_model_versions(f"name = '{cfg.registered_model_name}'") if int(v.version) > 1]


def kill(daemon) -> float:
    daemon.proc.send_signal(signal.SIGKILL)
    daemon.proc.wait(10)
    return time.monotonic()


def running_attempt(url: str, other_than: set[str]) -> str | None:
    rows = pg_rows(url, "SELECT id FROM retrain_attempts WHERE status = 'running' AND pid IS NOT NULL")
    return next((i for (i,) in rows if i not in other_than), None)


@pytest.mark.slow
def test_a_leader_killed_mid_retrain_or_after_registration_the_next_one_finishes_it(make_config, served,
                                                                                   postgres_server):
    url = postgres_server.create_database()
    cfg = make_config({"store": {"url": url}, "alerts": {"cooldown_seconds": 3600, "max_attempts": 1}})
    assert cfg.server.leader_lease_seconds == DEFAULT_LEASE
    with PredictionStore.from_config(cfg) as store:
        Traffic(cfg, store).send(1500, 90, concept=1.0)
    daemons = [served(cfg).start("--check-interval", "3600") for _ in range(3)]
    first, _ = wait_for_one_leader(daemons, DEFAULT_LEASE)
    seen: set[str] = set()
    took: list[float] = []

    # 1. The leader's first check opens an incident and retrains; kill it while the child trains.
    attempt = wait_until(lambda: running_attempt(url, seen), 120, 0.2, first.log)
    seen.add(attempt)
    wait_until(lambda: running_mlflow_runs(cfg), 120, 0.2, first.log)
    killed = kill(first)
    alive = [d for d in daemons if d is not first]
    second, _ = wait_for_one_leader(alive, DEFAULT_LEASE + 5)
    took.append(time.monotonic() - killed)
    retry = wait_until(lambda: running_attempt(url, seen), 30, 0.2, second.log)
    retried_after = time.monotonic() - killed
    seen.add(retry)
    assert dict(statuses(url))[attempt] == "interrupted", statuses(url)

    # 2. The new leader retried at once; kill it the moment its child registered a challenger.
    wait_until(lambda: retrain_versions(cfg), 180, 0.05, second.log)
    killed = kill(second)
    [third] = [d for d in alive if d is not second]
    wait_for_one_leader([third], DEFAULT_LEASE + 5)
    took.append(time.monotonic() - killed)

    def finished() -> bool:
        assert third.proc.poll() is None, third.log()
        return "promoted" in [s for _, s in statuses(url)]

    wait_until(finished, 240, 0.5, third.log)
    print(f"\nfail-over at the default lease ({DEFAULT_LEASE:g} s): {', '.join(f'{t:.1f}' for t in took)} s; "
          f"first retry running {retried_after:.1f} s after the kill; attempts {statuses(url)}")
    assert all(t <= DEFAULT_LEASE for t in took), took
    assert retried_after <= DEFAULT_LEASE + 20  # not after alerts.cooldown_seconds (an hour)

    final = [s for _, s in statuses(url)]
    assert final.count("promoted") == 1 and "failed" not in final and "running" not in final, final
    assert final[0] == "interrupted" and final[-1] == "promoted", final
    [(escalated, state)] = pg_rows(url, "SELECT escalated, state FROM incidents")
    assert not escalated and state == "promoted"  # an interruption is not a miss (alerts.max_attempts = 1)

    client = MlflowClient(tracking_uri=cfg.tracking_uri)
    history = json.loads(client.get_registered_model(cfg.registered_model_name).tags["driftloop.champion_history"])
    assert len(history) == 2 and history[0] == "1", history  # exactly one promotion
    versions = retrain_versions(cfg)
    for v in versions:  # no version left without an outcome or a fate
        assert v.tags.get("driftloop.outcome") or v.tags.get(FATE_TAG), (v.version, v.tags)
    orphans = [v for v in versions if v.tags.get(FATE_TAG) == ORPHANED]
    assert all(v.version != history[-1] for v in orphans)
    print(f"versions: {[(v.version, v.tags.get('driftloop.outcome'), v.tags.get(FATE_TAG)) for v in versions]}")
