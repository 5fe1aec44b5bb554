"""Oversized values, sent to a real daemon over HTTP: a 2 MiB categorical value and a 5 MiB
Alertmanager label are refused (422 naming the record and field), and nothing of them reaches the
store, the event log or a report. How long a refusal takes is measured by
``bench/bench_daemon.py --only webhook``, not here."""
from __future__ import annotations

import copy
import sqlite3

import httpx

from tests.faults.conftest import AUTH, FIRING, fault_config, running_daemon


def _count(cfg, table: str) -> int:
    with sqlite3.connect(cfg.home / "driftloop.db") as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def test_huge_values_are_refused_and_never_stored(tmp_path):
    cfg = fault_config(tmp_path / "home")
    with running_daemon(cfg) as (_, url), httpx.Client(base_url=url, headers=AUTH, timeout=30) as c:
        good = {"id": "p0", "score": 0.4, "features": {**{f"x{i}": 0.1 for i in range(8)},
                                                        "region": "north", "device": "ios"}}
        huge = copy.deepcopy(good) | {"id": "p1"}
        huge["features"]["device"] = "d" * (2 * 2**20)
        r = c.post("/v1/predictions", json=[good, huge])
        assert r.status_code == 422, r.text
        (error,) = r.json()["errors"]
        assert (error["index"], error["field"]) == (1, "features.device")
        assert "1024" in error["message"] and "model.max_value_chars" in error["message"]
        assert c.post("/v1/predictions", json=[good]).status_code == 200  # the batch was refused whole

        alert = copy.deepcopy(FIRING)
        alert["alerts"][0]["labels"]["blob"] = "b" * (5 * 2**20)
        r = c.post("/v1/alerts", json=alert)
        assert r.status_code == 422, r.text
        assert [e["field"] for e in r.json()["errors"]] == ["alerts.0.labels.blob"]
        assert _count(cfg, "incident_events") == 0 and _count(cfg, "incidents") == 0
        assert c.post("/v1/alerts", json=FIRING).status_code == 200  # a normal delivery still opens one
    with sqlite3.connect(cfg.home / "driftloop.db") as conn:
        longest = conn.execute("SELECT max(length(data)) FROM incident_events").fetchone()[0]
    assert longest is None or longest < 10_000
