"""Event rows stay within their documented bound for every kind (issue 35, item 5): an Alertmanager
delivery within every limit of its schema (it stored a 1.24 MB row), a note, a retrain's failure
and the attempt's error, a field update, and a note coalesced again and again. Sizes are read from
the stored rows, not from what the code meant to write."""
from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from monitor.daemon.decisions.lifecycle import Event
from monitor.daemon.runtime import alertmanager as am
from monitor.daemon.state.attempts import AttemptStore
from monitor.daemon.state.events import MAX_EVENT_DATA_BYTES, MAX_EVENT_MESSAGE_CHARS, event_data
from monitor.daemon.state.incidents import IncidentStore

HUGE = "x" * 1_000_000


def _rows(engine) -> list[tuple[str, int, int]]:
    """(kind, message characters, data bytes) of every stored event row."""
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT kind, message, data FROM incident_events ORDER BY id")).all()
    return [(kind, len(message or ""), len((data or "").encode())) for kind, message, data in rows]


def _assert_bounded(engine) -> None:
    for kind, chars, size in _rows(engine):
        assert chars <= MAX_EVENT_MESSAGE_CHARS, (kind, chars)
        assert size <= MAX_EVENT_DATA_BYTES, (kind, size)


@pytest.fixture
def incidents(engine, clock):
    return IncidentStore(engine, "demo", clock)


def _delivery_at_every_limit(model: str) -> am.WebhookPayload:
    """20 alerts, each with the most labels of the longest names and values, and the longest summary."""
    def labels(i: int) -> dict[str, str]:
        own = {"alertname": f"Alert{i}", "component": "model", "model": model, "reason": "drift"}
        filler = {f"{j:03d}" + "n" * (am.MAX_NAME_CHARS - 3): "v" * am.MAX_LABEL_CHARS
                  for j in range(am.MAX_PAIRS - len(own))}
        return {**own, **filler}
    payload = {"version": "4", "status": "firing", "receiver": "driftloop", "groupKey": "g" * am.MAX_TEXT_CHARS,
               "alerts": [{"status": "firing", "labels": labels(i), "fingerprint": f"fp{i}",
                           "annotations": {"summary": "s" * am.MAX_TEXT_CHARS}, "startsAt": "2026-11-30T10:00:00Z"}
                          for i in range(20)]}
    return am.WebhookPayload.model_validate(payload)


def test_an_alertmanager_delivery_within_every_limit_stores_bounded_rows(make_daemon):
    from monitor.daemon.runtime.triggers import handle_alertmanager

    daemon, _ = make_daemon({"alerts": {"retrain_on_drift": False}}, with_champion=False)
    payload = _delivery_at_every_limit(daemon.cfg.model.name)
    assert len(payload.model_dump_json()) > 1_000_000  # the delivery itself is well over a megabyte
    result = handle_alertmanager(daemon.controller, payload)
    assert result.incident is not None
    again = handle_alertmanager(daemon.controller, payload)  # a repeat coalesces into the same row
    assert again.incident is not None and again.incident.id == result.incident.id
    rows = _rows(daemon.store.engine)
    assert {kind for kind, _, _ in rows} >= {"opened", "alertmanager_firing"}
    _assert_bounded(daemon.store.engine)
    firing = next(e for e in daemon.controller.incidents.events(result.incident.id)
                  if e["kind"] == "alertmanager_firing")
    assert firing["data"]["truncated"] is True and firing["data"]["alerts"]  # shrunk, not dropped


def test_a_note_with_huge_text_and_data_is_bounded_and_stays_so_when_coalesced(incidents, engine):
    inc = incidents.open("manual", "manual", HUGE, data={"blob": HUGE})
    for _ in range(3):
        incidents.note(inc.id, "manual_retrain", HUGE, {"blob": HUGE, "items": list(range(100_000))}, coalesce=True)
    incidents.note(inc.id, "note", HUGE, [HUGE] * 50)
    _assert_bounded(engine)
    assert len(incidents.get(inc.id).detail) <= MAX_EVENT_MESSAGE_CHARS
    coalesced = [e for e in incidents.events(inc.id) if e["kind"] == "manual_retrain"]
    assert len(coalesced) == 1 and coalesced[0]["data"]["count"] == 3


def test_a_retrain_error_is_bounded_in_the_event_the_incident_and_the_attempt(incidents, engine, clock):
    inc = incidents.open("accuracy", "alert", "accuracy 0.80 vs 0.87")
    attempts = AttemptStore(engine, "demo", clock)
    attempt = attempts.begin(inc.id, "alert", rows=500)
    incidents.apply(inc.id, Event.START_RETRAIN, "retrain started")
    error = "Traceback (most recent call last):\n" + HUGE
    failed, _ = incidents.apply(inc.id, Event.FAIL, f"retrain failed: {error}", data={"error": error})
    done = attempts.finish(attempt.id, "failed", error=error)
    _assert_bounded(engine)
    assert len(failed.detail) <= MAX_EVENT_MESSAGE_CHARS and failed.detail.startswith("retrain failed: Traceback")
    assert done.error is not None and len(done.error) <= MAX_EVENT_MESSAGE_CHARS


def test_a_field_update_event_is_bounded(incidents, engine):
    inc = incidents.open("accuracy", "alert", "accuracy 0.80 vs 0.87")
    incidents.update(inc.id, "escalated", HUGE, escalated=True, detail=HUGE)
    _assert_bounded(engine)


def test_data_is_shrunk_step_by_step_and_small_data_kept_whole():
    small = {"alerts": [{"labels": {"alertname": "A"}}]}
    assert json.loads(event_data(small)) == small
    assert event_data(None) is None
    wide = {"alerts": [{"labels": {f"k{j}": "v" * 1024 for j in range(64)}} for _ in range(20)]}
    shrunk = json.loads(event_data(wide))
    assert shrunk["truncated"] is True and len(json.dumps(shrunk)) <= MAX_EVENT_DATA_BYTES
    assert 2 <= len(shrunk["alerts"]) <= 11 and shrunk["alerts"][-1].endswith("more")  # the first few, then a count
    first = shrunk["alerts"][0]["labels"]
    assert "k0" in first and first["k0"].startswith("v") and len(first["k0"]) <= 300
    flat = json.loads(event_data("z" * 100_000))  # no structure to keep: cut
    assert flat["truncated"] is True
