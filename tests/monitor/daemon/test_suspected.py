"""The early warning on the real daemon: a drop estimated from the scores alone opens a
``suspected`` incident before labels arrive; labels confirm or clear it. Real store, real
Evidently, the real champion from MLflow; the retrain child is the scripted stand-in."""
from __future__ import annotations

from monitor.daemon.decisions.actions import ActionKind
from tests.monitor.daemon.conftest import Traffic
from tests.monitor.daemon.test_controller import samples


def _suspect(daemon, traffic):
    # Rows near the model's boundary: accuracy really falls, and the scores say so. 100 labels < 300.
    df = traffic.send(1500, 70, near_boundary=0.25, labelled=0.0)
    daemon.store.add_labels(df[["id", "label", "ts"]].head(100))
    report = daemon.run_check_now()
    assert not report.verdict.performance_known and report.verdict.suspect, report.verdict.message
    return df, report


def test_estimated_drop_opens_suspected_without_retraining_then_labels_confirm(make_daemon):
    daemon, traffic = make_daemon()
    daemon.start(scheduler=False)
    df, report = _suspect(daemon, traffic)
    incident = report.incident
    assert incident.state == "suspected" and incident.reason == "accuracy" and not incident.retrain
    assert report.action.kind is ActionKind.OPENED_SUSPECTED and not report.action.started
    assert daemon.controller.attempts.recent(5) == []
    r = report.outcome.result
    assert r.estimated_accuracy < r.baseline_accuracy - 0.03 and r.estimated_accuracy_ci[1] < r.baseline_accuracy - 0.03
    m = samples(daemon)
    assert m[("driftloop_incident_suspected", ())] == 1
    assert m[("driftloop_model_estimated_accuracy", ())] == r.estimated_accuracy
    assert daemon.status()["open_incidents"][0]["state"] == "suspected"
    # Again without labels: still suspected, no retrain, the incident is not duplicated.
    again = daemon.run_check_now()
    assert again.incident.id == incident.id and again.incident.state == "suspected"
    # The labels arrive and confirm the drop: it goes on as a firing incident and retrains.
    daemon.store.add_labels(df[["id", "label", "ts"]].iloc[100:])
    confirmed = daemon.run_check_now()
    assert confirmed.verdict.performance_known and confirmed.verdict.fire
    assert confirmed.action.kind is ActionKind.CONFIRMED and confirmed.action.started, confirmed.action
    events = daemon.controller.incidents.events(incident.id)
    firing = next(e for e in events if e["kind"] == "firing")
    assert firing["message"].startswith("confirmed by labels")
    data = firing["data"]
    assert data["realised_accuracy"] == confirmed.outcome.result.accuracy
    assert abs(data["error_vs_opening"]) < 0.05  # the estimate was close to what the labels said
    assert data["estimation_error_same_rows"] == confirmed.outcome.result.estimation_error
    assert daemon.controller.incidents.get(incident.id).retrain
    assert daemon.wait_for_retrain(60)


def test_labels_that_say_healthy_clear_a_suspected_incident_across_a_restart(make_daemon):
    daemon, traffic = make_daemon()
    daemon.start(scheduler=False)
    _, report = _suspect(daemon, traffic)
    incident = report.incident
    daemon.stop(grace=2)  # the suspected incident is persisted; a new daemon picks it up
    daemon, _ = make_daemon()
    daemon.start(scheduler=False)
    assert daemon.controller.incidents.current().state == "suspected"
    traffic = Traffic(daemon.cfg, daemon.store, start=traffic.t)
    traffic.send(1500, 71)  # ordinary rows, labelled: the window is healthy
    cleared = daemon.run_check_now()
    assert cleared.verdict.performance_known and cleared.action.kind is ActionKind.CLEARED, cleared.action
    assert daemon.controller.incidents.get(incident.id).state == "resolved"
    resolved = [e for e in daemon.controller.incidents.events(incident.id) if e["kind"] == "resolved"][0]
    assert resolved["message"].startswith("cleared by labels") and "realised_accuracy" in resolved["data"]
    assert daemon.controller.attempts.recent(5) == []
    assert samples(daemon)[("driftloop_incident_suspected", ())] == 0


def test_retrain_on_estimate_retrains_a_suspected_incident(make_daemon):
    # drift.labelled_window off: the window would reach back into the labelled history and judge the
    # drop on labels (tests/monitor/daemon/test_label_starved.py); here the estimate must decide.
    daemon, traffic = make_daemon({"alerts": {"retrain_on_estimate": True}, "training": {"min_post_change_rows": 100},
                                   "drift": {"labelled_window": False}})
    daemon.start(scheduler=False)
    traffic.send(1500, 72)  # labelled history to train on
    daemon.run_check_now()
    _, report = _suspect(daemon, traffic)
    assert report.incident is not None and report.incident.retrain
    assert report.action.kind is ActionKind.OPENED_SUSPECTED and report.action.started, report.action
    assert daemon.controller.incidents.get(report.incident.id).state == "retraining"
    assert daemon.wait_for_retrain(60)
