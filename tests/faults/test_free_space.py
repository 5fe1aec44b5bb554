"""``store.min_free_bytes`` is enforced at ingest, not only reported by /readyz (issue 23): below it,
``POST /v1/predictions`` and ``/v1/labels`` answer 503 + Retry-After naming the key and store nothing."""
from __future__ import annotations

import os

import httpx

from monitor.ingest import create_app
from monitor.ingest.health import SpaceGuard
from monitor.store import PredictionStore
from tests.monitor.ingest.conftest import TOKEN, make_config, serve

AUTH = {"Authorization": f"Bearer {TOKEN}"}
ROWS = [{"id": f"r{i}", "features": {"x0": 0.5, "x1": 1.0, "region": "eu"}, "score": 0.7} for i in range(20)]
LABELS = [{"id": f"r{i}", "label": 1} for i in range(20)]


def test_ingest_below_min_free_bytes_is_503_and_stores_nothing(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    fs = os.statvfs(home)
    beyond = fs.f_bavail * fs.f_frsize + 2**40  # a threshold larger than the disk's free space
    cfg = make_config(home)
    cfg = cfg.model_copy(update={"store": cfg.store.model_copy(update={"min_free_bytes": beyond})})
    with PredictionStore.from_config(cfg) as store, serve(create_app(cfg, store)) as url, \
            httpx.Client(base_url=url, headers=AUTH, timeout=10) as c:
        for path, body in (("/v1/predictions", ROWS), ("/v1/labels", LABELS)):
            r = c.post(path, json=body)
            assert r.status_code == 503, r.text
            assert int(r.headers["retry-after"]) >= 1
            assert f"store.min_free_bytes={beyond}" in r.json()["error"] and "full" in r.json()["error"]
        assert store.row_counts() == {"predictions": 0, "labels": 0}
        assert c.get("/readyz").status_code == 503
        assert 'driftloop_ingest_rejected_total{kind="prediction",model="m",reason="unavailable"} 1.0' \
            in c.get("/metrics").text

    # The same store with room to spare (the default threshold) takes the batches.
    cfg = make_config(home)
    with PredictionStore.from_config(cfg) as store, serve(create_app(cfg, store)) as url, \
            httpx.Client(base_url=url, headers=AUTH, timeout=10) as c:
        r = c.post("/v1/predictions", json=ROWS)
        assert r.json().get("stored") == 20, r.text
        assert c.post("/v1/labels", json=LABELS).json()["stored"] == 20


def test_the_space_probe_runs_once_a_second_while_fine_and_every_batch_while_not():
    calls, state, now = [], {"reason": None}, [0.0]

    def probe():
        calls.append(now[0])
        return state["reason"]

    guard = SpaceGuard(probe, ttl=1.0, clock=lambda: now[0])
    assert [guard.problem() for _ in range(100)] == [None] * 100 and len(calls) == 1
    state["reason"] = "full"
    assert guard.problem() is None            # fine a moment ago: cached for the second
    now[0] = 1.0
    assert guard.problem() == "full" and guard.problem() == "full" and len(calls) == 3
    state["reason"] = None
    assert guard.problem() is None and len(calls) == 4  # freed: the next batch goes in
