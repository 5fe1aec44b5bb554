"""A locked SQLite store does not stall the daemon (issue 23): with the write lock held by another
connection (``BEGIN EXCLUSIVE``), liveness and metrics answer from the process, and every endpoint
that needs the store answers 503 + Retry-After within its bounded wait, all within 1 s, also while
many /readyz wait at once."""
from __future__ import annotations

import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.faults.conftest import AUTH, assert_no_5xx_but_503, fault_config, running_daemon
from tests.faults.test_dependencies import prediction


def _timed(c: httpx.Client, method: str, path: str, **kw) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    r = c.request(method, path, **kw)
    return r, time.monotonic() - started


def test_every_endpoint_answers_within_a_second_while_the_store_is_locked(tmp_path):
    cfg = fault_config(tmp_path / "home", store={"busy_timeout_seconds": 0.5})
    with running_daemon(cfg) as (daemon, url), httpx.Client(base_url=url, timeout=30) as c:
        assert c.post("/v1/predictions", json=[prediction(i) for i in range(20)], headers=AUTH).status_code == 200
        assert "driftloop_store_rows" in c.get("/metrics").text
        assert c.get("/v1/status").status_code == 200  # first use loads MLflow and scipy: not what is timed
        holder = sqlite3.connect(cfg.home / "driftloop.db", isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            with ThreadPoolExecutor(60) as pool:  # a crowd of readiness probes, all waiting on the lock
                crowd = [pool.submit(httpx.get, f"{url}/readyz", timeout=30) for _ in range(60)]
                time.sleep(0.2)
                answers = {
                    "livez": _timed(c, "GET", "/livez"),
                    "metrics": _timed(c, "GET", "/metrics"),
                    "readyz": _timed(c, "GET", "/readyz"),
                    "status": _timed(c, "GET", "/v1/status"),
                    "predictions": _timed(c, "POST", "/v1/predictions", json=[prediction(100)], headers=AUTH),
                    "retrain": _timed(c, "POST", "/v1/retrain", json={"reason": "locked"}, headers=AUTH),
                    "reference_reset": _timed(c, "POST", "/v1/reference/reset", headers=AUTH),
                }
                crowd_answers = [f.result() for f in crowd]
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        slow = {k: round(t, 2) for k, (_, t) in answers.items() if t >= 1.0}
        assert not slow, f"answered after 1 s or more: {slow}"
        for name, (r, _) in answers.items():
            assert_no_5xx_but_503(r, name)
        assert answers["livez"][0].status_code == 200
        metrics = answers["metrics"][0]
        assert metrics.status_code == 200 and "driftloop_store_stats_age_seconds" in metrics.text
        for name in ("readyz", "predictions", "retrain"):
            assert answers[name][0].status_code == 503, (name, answers[name][0].text)
        # No champion here: refused (409) before the store is touched; within the second all the same.
        assert answers["reference_reset"][0].status_code in (409, 503)
        assert "driftloop_store_stats_age_seconds" in c.get("/metrics").text
        assert all(r.status_code == 503 for r in crowd_answers)
        # Released: everything answers normally again, and the refused batch can be re-sent.
        assert c.get("/readyz").status_code == 200
        assert c.post("/v1/predictions", json=[prediction(100)], headers=AUTH).json()["stored"] == 1
