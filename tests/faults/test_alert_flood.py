"""Idempotent alerts: Alertmanager deliveries deduplicated by fingerprint + startsAt, a replay of
a resolved alert recorded but not acted on, and an alert flood adding O(1) rows."""
from __future__ import annotations

import copy
import sqlite3

import httpx

from tests.faults.conftest import AUTH, FIRING, fault_config, running_daemon

FLOOD = 1000


def count(cfg, table: str) -> int:
    with sqlite3.connect(cfg.home / "driftloop.db") as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def rows(cfg) -> dict[str, int]:
    return {t: count(cfg, t) for t in ("incidents", "incident_events", "alert_deliveries", "retrain_attempts")}


def resolved(payload: dict) -> dict:
    out = copy.deepcopy(payload)
    out["status"] = "resolved"
    for alert in out["alerts"]:
        alert["status"], alert["endsAt"] = "resolved", "2026-11-30T10:30:00Z"
    return out


def test_a_flood_of_deliveries_adds_constant_rows_and_a_replay_is_not_acted_on(tmp_path):
    cfg = fault_config(tmp_path / "home")  # an empty store: every retrain is deferred (too few rows)
    with running_daemon(cfg) as (daemon, url), httpx.Client(base_url=url, headers=AUTH, timeout=30) as c:
        first = c.post("/v1/alerts", json=FIRING).json()
        assert first["kind"] == "opened" and first["retrain"] == "waiting", first  # too few rows to train on
        assert first["action"].startswith("opened incident")  # the sentence people read
        after_first = rows(cfg)
        for i in range(FLOOD):  # Alertmanager re-sending the same firing group (repeat_interval, retries)
            assert c.post("/v1/alerts", json=FIRING).status_code == 200
            if i == 9:
                after_ten = rows(cfg)
        after_flood = rows(cfg)
        # O(1): the flood adds at most the notes of one state change (firing -> waiting), then nothing.
        assert after_flood == after_ten, (after_ten, after_flood)
        assert after_flood["incident_events"] - after_first["incident_events"] <= 2, (after_first, after_flood)
        assert after_flood["incidents"] == 1 and after_flood["alert_deliveries"] == 1
        events = daemon.controller.incidents.events(first["incident"]["id"])
        firing = [e for e in events if e["kind"] == "alertmanager_firing"]
        assert sum((e["data"] or {}).get("count", 1) for e in firing) == FLOOD + 1  # counted, not repeated

        # A flood of distinct alerts: one ledger row each (that is their identity), events stay bounded.
        for i in range(FLOOD):
            distinct = copy.deepcopy(FIRING)
            distinct["alerts"][0]["fingerprint"] = f"flood-{i}"
            assert c.post("/v1/alerts", json=distinct).status_code == 200
        now = rows(cfg)
        assert now["incidents"] == 1 and now["incident_events"] == after_flood["incident_events"]
        assert now["alert_deliveries"] == after_first["alert_deliveries"] + FLOOD

        # The first alert resolves while the distinct ones still fire: noted, the incident stays open.
        r = c.post("/v1/alerts", json=resolved(FIRING)).json()
        assert r["kind"] == "noted" and r["incident"]["state"] != "resolved", r
        # The last of them resolves (Alertmanager sends a group's resolutions together): resolved.
        rest = resolved(FIRING)
        rest["alerts"] = [{**rest["alerts"][0], "fingerprint": f"flood-{i}"} for i in range(FLOOD)]
        r = c.post("/v1/alerts", json=rest).json()
        assert r["kind"] == "resolved" and r["retrain"] is None
        # The firing notification delivered again after its resolution: recorded, not acted on.
        replay = c.post("/v1/alerts", json=FIRING).json()
        assert replay["replayed"] == 1 and replay["firing"] == 0 and replay["incident"] is None
        assert replay["kind"] == "replay_ignored"
        assert count(cfg, "incidents") == 1 and count(cfg, "retrain_attempts") == 0
        # The same alert firing again later (a new startsAt) is a new episode: acted on.
        again = copy.deepcopy(FIRING)
        again["alerts"][0]["startsAt"] = "2026-11-30T12:00:00Z"
        assert c.post("/v1/alerts", json=again).json()["kind"] == "opened"
        assert count(cfg, "incidents") == 2
