"""Alertmanager deliveries a follower takes for the model's leader (several daemons on one
PostgreSQL store): held in the store, acted on by the leader within seconds, never dropped. Before
this, a follower answered 200 from the fleet's ``/v1/alerts`` with a "follower" error for its model
and the alert was lost (no daemon leads every model, so nothing re-sent it to the leader)."""
from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from monitor.daemon.decisions.kinds import Reason
from monitor.daemon.runtime.alertmanager import WebhookPayload
from monitor.daemon.state import inbox as inbox_module
from monitor.daemon.state.inbox import AlertInbox, InboxFullError
from tests.support.postgres import postgres_server  # noqa: F401  (session fixture)
from tests.support.waiting import wait_until


def firing(model: str, fingerprint: str = "f00d") -> dict:
    return {"version": "4", "status": "firing", "receiver": "driftloop", "groupKey": "{}:{}",
            "alerts": [{"status": "firing", "labels": {"alertname": "ModelAccuracyDrop", "component": "model",
                                                       "model": model},
                        "annotations": {"summary": "accuracy dropped"}, "startsAt": "2026-11-30T10:00:00Z",
                        "fingerprint": fingerprint},
                       {"status": "firing", "labels": {"alertname": "ModelAccuracyDrop", "component": "model",
                                                       "model": "another-model"},
                        "startsAt": "2026-11-30T10:00:00Z", "fingerprint": "beef"}]}


def test_the_inbox_keeps_deliveries_in_order_until_done_and_bounds_them(engine, clock, monkeypatch):
    box = AlertInbox(engine, "m1", clock)
    other = AlertInbox(engine, "m2", clock)
    first, second = box.put({"n": 1}), box.put({"n": 2})
    other.put({"n": 3})
    assert [(d.id, d.payload) for d in box.pending()] == [(first, {"n": 1}), (second, {"n": 2})]
    clock.advance(30)
    assert box.backlog() == (2, 30.0) and AlertInbox(engine, "m3", clock).backlog() == (0, 0.0)
    box.done(first)
    assert [d.payload for d in box.pending()] == [{"n": 2}] and other.count() == 1

    monkeypatch.setattr(inbox_module, "MAX_PENDING", 2)
    box.put({"n": 4})
    with pytest.raises(InboxFullError, match="2 Alertmanager deliveries for model 'm1'"):
        box.put({"n": 5})
    clock.advance(inbox_module.KEEP_SECONDS + 1)  # nobody took them for a day: dropped, room again
    box.put({"n": 6})
    assert [d.payload for d in box.pending()] == [{"n": 6}]


@pytest.mark.slow
def test_a_follower_holds_the_alert_and_the_leader_acts_on_it(make_daemon, postgres_server):
    url = postgres_server.create_database()
    overrides = {"store": {"url": url}, "server": {"leader_lease_seconds": 2}}
    leader, _ = make_daemon(overrides)
    leader.start(check_interval=3600)
    wait_until(lambda: leader.is_leader, 10, 0.05, "the first daemon did not lead")
    follower, _ = make_daemon(overrides, with_champion=False, name="follower")  # not started: a follower
    assert not follower.is_leader
    model = leader.cfg.model.name

    answer = follower.handle_alerts(WebhookPayload.model_validate(firing(model))).to_dict()
    assert answer["kind"] == "queued" and answer["firing"] == 1 and answer["ignored"] == 1, answer
    assert "leading this model" in answer["action"]
    assert follower.controller.incidents.current() is None  # a follower opens nothing itself

    scrape = generate_latest(follower.registry).decode()
    assert f'driftloop_alert_inbox_held{{model="{model}"}}' in scrape  # what an operator watches
    incident = wait_until(leader.controller.incidents.current, 15, 0.1, "the leader did not act on the held alert")
    assert incident.reason == Reason.ALERTMANAGER
    events = leader.controller.incidents.events(incident.id)
    notes = [e["message"] for e in events if e["kind"] == "alertmanager_firing"]
    assert notes and "accuracy dropped" in notes[0], notes
    assert wait_until(lambda: AlertInbox(leader.store.engine, model, leader.clock).count() == 0, 10, 0.1)
    held = [line for line in generate_latest(follower.registry).decode().splitlines()
            if line.startswith("driftloop_alert_inbox_")]
    assert held == [f'driftloop_alert_inbox_held{{model="{model}"}} 0.0',
                    f'driftloop_alert_inbox_oldest_age_seconds{{model="{model}"}} 0.0'], held

    # Delivered again to the follower: held again, and the leader's ledger knows it is a repeat.
    follower.handle_alerts(WebhookPayload.model_validate(firing(model)))
    wait_until(lambda: AlertInbox(leader.store.engine, model, leader.clock).count() == 0, 15, 0.1,
               "the leader did not take the second delivery")
    assert leader.controller.incidents.current().id == incident.id  # attached, not a second incident

    # Nothing for this model: nothing held.
    nothing = follower.handle_alerts(WebhookPayload.model_validate(
        {**firing(model), "alerts": firing(model)["alerts"][1:]})).to_dict()
    assert nothing["kind"] == "nothing" and "held" not in nothing


def test_held_deliveries_wait_while_mlflow_is_unavailable_then_are_acted_on_once(make_daemon, monkeypatch):
    from monitor.errors import RegistryError

    daemon, _ = make_daemon()
    daemon.start(scheduler=False)
    model = daemon.cfg.model.name
    box = AlertInbox(daemon.store.engine, model, daemon.clock)
    box.put(firing(model))
    box.put({"version": "4", "status": "firing", "alerts": [{"status": "firing", "labels": "not an object"}]})

    def down() -> None:
        raise RegistryError("MLflow at sqlite:///x is unreachable")
    monkeypatch.setattr(daemon, "check_registry", down)
    assert daemon.take_held_alerts() == 0 and box.count() == 2  # they wait; nothing acted upon
    assert daemon.controller.incidents.current() is None
    monkeypatch.undo()
    assert daemon.take_held_alerts() == 2 and box.count() == 0  # the unreadable one is dropped, not retried forever
    incident = daemon.controller.incidents.current()
    assert incident is not None and incident.reason == Reason.ALERTMANAGER
    assert daemon.take_held_alerts() == 0  # nothing left
