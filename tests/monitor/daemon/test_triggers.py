"""Retrains asked for from outside the checks (Alertmanager's webhook, a person, the schedule) say
what they did as a kind and its data; the API's ``action`` is the sentence made from them."""
from __future__ import annotations

import copy

from monitor.daemon.decisions.actions import StartKind, TriggerAction, TriggerKind
from monitor.daemon.decisions.kinds import Reason, State
from monitor.daemon.runtime.alertmanager import WebhookPayload

FIRING = {"version": "4", "status": "firing", "receiver": "driftloop", "groupKey": "{}:{}",
          "alerts": [{"status": "firing", "labels": {"alertname": "ModelAccuracyDrop", "component": "model",
                                                      "model": "demo", "reason": "accuracy"},
                      "annotations": {"summary": "accuracy dropped"}, "startsAt": "2026-11-30T10:00:00Z",
                      "fingerprint": "f00d"}]}


def payload(status: str = "firing", model: str = "demo") -> WebhookPayload:
    out = copy.deepcopy(FIRING)
    out["status"] = out["alerts"][0]["status"] = status
    out["alerts"][0]["labels"]["model"] = model
    if status == "resolved":
        out["alerts"][0]["endsAt"] = "2026-11-30T10:30:00Z"
    return WebhookPayload.model_validate(out)


def test_the_api_sentence_is_made_from_the_kind_and_its_data():
    """The words of ``POST /v1/alerts`` and ``POST /v1/retrain`` (``action``) stay what they were."""
    for kind in TriggerKind:
        assert TriggerAction(kind, "inc-1").describe()
    started = TriggerAction(TriggerKind.OPENED, "inc-1", StartKind.STARTED, "att-1", "retrain att-1 started")
    assert started.started and str(started) == "opened incident inc-1; retrain att-1 started"
    waiting = TriggerAction(TriggerKind.ATTACHED, "inc-1", StartKind.WAITING, detail="waiting for 300 more rows")
    assert not waiting.started and str(waiting) == "attached to incident inc-1; waiting for 300 more rows"
    assert str(TriggerAction(TriggerKind.RESOLVED, "inc-1")) == "resolved incident inc-1"
    assert str(TriggerAction(TriggerKind.NOTED, "inc-1")) == "noted on incident inc-1"
    assert str(TriggerAction(TriggerKind.REPLAY_IGNORED)) == \
        "recorded: replayed firing alert(s) already resolved; not acted upon"
    assert str(TriggerAction(TriggerKind.NOTHING)) == "nothing to do: no firing alert concerns this model"


def test_alertmanager_deliveries_say_what_they_did(make_daemon):
    daemon, traffic = make_daemon()
    traffic.send(300, 110)
    assert daemon.handle_alerts(payload(model="other")).action.kind is TriggerKind.NOTHING

    opened = daemon.handle_alerts(payload())
    assert opened.action.kind is TriggerKind.OPENED and opened.action.started, opened.action
    assert opened.incident.reason == Reason.ALERTMANAGER and opened.action.incident_id == opened.incident.id
    answer = opened.to_dict()  # the API's JSON: the sentence for people, the kinds for programs
    assert answer["action"] == opened.action.describe()
    assert (answer["kind"], answer["retrain"]) == ("opened", "started")
    assert opened.action.attempt_id == daemon.controller.attempts.for_incident(opened.incident.id)[0].id
    assert daemon.wait_for_retrain(60)

    again = daemon.handle_alerts(payload())  # the same alert, delivered again: attaches
    assert again.action.kind is TriggerKind.ATTACHED and again.action.incident_id == opened.incident.id
    assert again.action.retrain is not None and not again.action.started, again.action

    resolved = daemon.handle_alerts(payload("resolved"))
    assert resolved.action.kind is TriggerKind.RESOLVED and resolved.incident.state is State.RESOLVED

    replay = daemon.handle_alerts(payload())  # the firing delivery again, after its resolution
    assert replay.action.kind is TriggerKind.REPLAY_IGNORED and replay.incident is None
    assert replay.details["replayed"] == 1


def test_an_alertmanager_incident_resolves_when_its_last_alert_does(make_daemon):
    # Alertmanager groups by alertname: AccuracyDrop and RocAucDrop come as separate notifications.
    # The first to resolve closed the incident while the other still fired.
    daemon, traffic = make_daemon()
    traffic.send(300, 110)
    auc = copy.deepcopy(FIRING)
    auc["alerts"][0]["labels"]["alertname"], auc["alerts"][0]["fingerprint"] = "ModelRocAucDrop", "beef"
    opened = daemon.handle_alerts(payload())
    assert opened.action.kind is TriggerKind.OPENED
    assert daemon.wait_for_retrain(60)  # the retrain ends; the incident waits on its alerts
    assert daemon.handle_alerts(WebhookPayload.model_validate(auc)).action.kind is TriggerKind.ATTACHED
    incident = daemon.controller.incidents.get(opened.incident.id)
    assert incident.state is not State.RETRAINING, incident
    first = daemon.handle_alerts(payload("resolved"))  # ModelAccuracyDrop resolves; RocAucDrop fires on
    assert first.action.kind is TriggerKind.NOTED and first.incident.is_open
    events = [e["kind"] for e in daemon.controller.incidents.events(opened.incident.id)]
    assert "alertmanager_still_firing" in events
    auc["status"] = auc["alerts"][0]["status"] = "resolved"
    auc["alerts"][0]["endsAt"] = "2026-11-30T10:40:00Z"
    last = daemon.handle_alerts(WebhookPayload.model_validate(auc))
    assert last.action.kind is TriggerKind.RESOLVED and last.incident.state is State.RESOLVED


def test_a_resolved_alert_is_noted_on_an_incident_it_did_not_open(make_daemon):
    daemon, traffic = make_daemon(behaviour="hang")  # the manual retrain runs on
    traffic.send(300, 110)
    manual = daemon.retrain_now("manual", "new labels")
    assert manual.action.kind is TriggerKind.OPENED and manual.action.started, manual.action
    assert manual.details["attempt_id"] == manual.action.attempt_id
    noted = daemon.handle_alerts(payload("resolved"))
    assert noted.action.kind is TriggerKind.NOTED and noted.action.incident_id == manual.incident.id
    assert noted.action.retrain is None
