"""Three ``driftloop serve`` share six models on one PostgreSQL store (issue 33 item 5): each model has
exactly one leader, leases are balanced (a daemon leads at most ⌈models / daemons⌉ + 1), and when one
daemon is killed (SIGKILL) its models move to the others within 2 × the lease; every model keeps being
checked, never by two daemons at once."""
from __future__ import annotations

import math
import signal
import time

import httpx
import psycopg
import pytest
import yaml

from monitor.daemon.runtime.leader import lock_key
from tests.conftest import free_port
from tests.monitor.daemon.test_serve import Served
from tests.support.postgres import postgres_server  # noqa: F401  (fixture)
from tests.support.waiting import wait_until

LEASE = 2.0
MODELS = [f"m{i}" for i in range(6)]
FEATURES = [{"name": "x", "type": "numeric"}]


def led(daemon) -> set[str]:
    """The models whose leader this daemon says it is (its /metrics)."""
    try:
        text = httpx.get(daemon.url + "/metrics", timeout=3).text
    except httpx.HTTPError:
        return set()
    return {line.split('model="')[1].split('"')[0] for line in text.splitlines()
            if line.startswith("driftloop_daemon_leader{") and line.endswith(" 1.0")}


def lock_holders(port: int) -> dict[str, int]:
    """Model → how many sessions hold its leader lock (the store's own account)."""
    with psycopg.connect(f"host=127.0.0.1 port={port} user=postgres dbname=postgres", autocommit=True) as conn:
        rows = conn.execute("SELECT objid, count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                            "AND classid = 0 GROUP BY objid").fetchall()
    keys = {lock_key(m): m for m in MODELS}
    return {keys[int(objid)]: n for objid, n in rows if int(objid) in keys}


def checks(url: str) -> dict[str, list[float]]:
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        rows = conn.execute("SELECT model, ts FROM check_results ORDER BY ts").fetchall()
    out: dict[str, list[float]] = {}
    for model, ts in rows:
        out.setdefault(model, []).append(float(ts))
    return out


@pytest.mark.slow
def test_three_daemons_share_six_models_and_a_killed_daemons_models_move(tmp_path, postgres_server):
    url = postgres_server.create_database()
    config = {"home": str(tmp_path / "home"), "store": {"url": url},
              "server": {"leader_lease_seconds": LEASE, "gpu_metrics": False},
              "models": {m: {"model": {"features": FEATURES}} for m in MODELS}}

    class Daemon(Served):
        def __init__(self, n: int):
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            self.config_file = tmp_path / "driftloop.yaml"
            self.config_file.write_text(yaml.safe_dump(config))
            self.log_path = tmp_path / f"serve-{n}.log"
            self.token = None
            self.proc = None

    daemons: list = []
    try:
        for n in range(3):
            daemons.append(Daemon(n).start("--check-interval", "1"))
        cap = math.ceil(len(MODELS) / len(daemons)) + 1

        def balanced() -> bool:
            shares = [led(d) for d in daemons]
            every = set().union(*shares)
            return (every == set(MODELS) and sum(map(len, shares)) == len(MODELS)
                    and all(0 < len(s) <= cap for s in shares))
        wait_until(balanced, 6 * LEASE, 0.2, lambda: f"not balanced: {[sorted(led(d)) for d in daemons]}")
        assert all(n == 1 for n in lock_holders(postgres_server.port).values())
        # Every daemon ingests for every model, whoever leads it.
        for d in daemons:
            r = httpx.post(d.url + "/v1/models/m0/predictions", timeout=10,
                           json=[{"id": f"r-{d.port}", "features": {"x": 1.0}, "score": 0.5}])
            assert r.status_code == 200, r.text

        victim = max(daemons, key=lambda d: len(led(d)))
        moved = led(victim)
        survivors = [d for d in daemons if d is not victim]
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(10)
        killed_at = time.monotonic()

        def taken_over() -> bool:
            shares = [led(d) for d in survivors]
            return set().union(*shares) == set(MODELS) and sum(map(len, shares)) == len(MODELS)
        wait_until(taken_over, 2 * LEASE + 2, 0.1, lambda: f"not taken over: {[sorted(led(d)) for d in survivors]}")
        took = time.monotonic() - killed_at
        print(f"\n{len(moved)} models of the killed daemon moved in {took:.2f} s (lease {LEASE:g} s)")
        assert took <= 2 * LEASE + 1  # the scrape's own polling adds up to ~0.1 s a daemon
        assert all(n == 1 for n in lock_holders(postgres_server.port).values())
        assert all(len(led(d)) <= math.ceil(len(MODELS) / len(survivors)) + 1 for d in survivors)

        # Checks go on for every model, one daemon at a time: no model checked twice within half an
        # interval (two leaders), and every model checked again after the kill (none lost).
        time.sleep(3)
        seen = checks(url)
        for model in MODELS:
            times = seen.get(model, [])
            assert any(t > time.time() - 2.5 for t in times), (model, "not checked since the kill")
            gaps = [b - a for a, b in zip(times, times[1:])]
            assert min(gaps) > 0.5, (model, "checked twice at once", gaps)
        for d in survivors:
            d.proc.send_signal(signal.SIGTERM)
            assert d.proc.wait(60) == 0
    finally:
        for d in daemons:  # a failed assertion must not leave daemons behind
            if d.proc is not None and d.proc.poll() is None:
                d.proc.kill()
                d.proc.wait()
