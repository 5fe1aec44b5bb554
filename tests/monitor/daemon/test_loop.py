"""The closed loop with every part real: store, Evidently, MLflow, and the trainer retraining in
a child process (``python -m monitor.daemon.retraining.worker`` -> ``trainer.worker``)."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from monitor.daemon.runtime.daemon import Daemon
from tests.monitor.daemon.conftest import Traffic


def champion_history(cfg) -> list[str]:
    from mlflow import MlflowClient
    tags = MlflowClient(tracking_uri=cfg.tracking_uri).get_registered_model(cfg.registered_model_name).tags
    return json.loads(tags.get("driftloop.champion_history", "[]"))


@pytest.fixture
def daemon_for(make_config):
    made = []

    def make(cfg):
        daemon = Daemon(cfg)
        made.append(daemon)
        return daemon
    yield make
    for d in made:
        d.stop(grace=5)


def test_concept_drift_retrains_promotes_and_recovers(make_config, daemon_for):
    cfg = make_config({"training": {"epochs": 30, "retrain_epochs": 30, "patience": 5}})
    daemon = daemon_for(cfg)
    daemon.start(scheduler=False)
    traffic = Traffic(cfg, daemon.store)
    traffic.send(1500, 70)
    assert daemon.run_check_now().incident is None

    traffic.send(1500, 71, concept=1.0)  # the world changes: same inputs, other labels
    report = daemon.run_check_now()
    incident = report.incident
    assert incident is not None and incident.reason == "accuracy" and incident.state == "retraining"
    # The reports it cites are kept in the incident's own folder: report retention cannot remove them.
    kept = [p for p in incident.report_paths if p.endswith(report.outcome.report_html.name)]
    assert (kept and f"incidents/{incident.id}/" in kept[0]
            and open(kept[0]).read() == report.outcome.report_html.read_text())
    summary = [p for p in incident.report_paths if p.endswith(".summary.html")]  # the page MLflow's viewer renders
    assert summary and f"incidents/{incident.id}/" in summary[0] and "<script" not in open(summary[0]).read()
    from monitor.drift.workspace import snapshot_checks  # each check's snapshot went to the Evidently workspace
    assert snapshot_checks(cfg.evidently_workspace, cfg.model.name)[-1] == report.outcome.result.check_id
    assert len(snapshot_checks(cfg.evidently_workspace, cfg.model.name)) == 2
    assert daemon.wait_for_retrain(300)

    incident = daemon.controller.incidents.get(incident.id)
    attempt = daemon.controller.attempts.for_incident(incident.id)[0]
    assert incident.state == "promoted", (incident.outcome_reasons, attempt.error)
    assert attempt.status == "promoted" and attempt.challenger_version == "2" and attempt.samples_per_second > 0
    from mlflow import MlflowClient  # the retrain run carries the summary page MLflow's viewer renders
    attached = [a.path for a in MlflowClient(tracking_uri=cfg.tracking_uri).list_artifacts(attempt.run_id, "reports")]
    assert any(p.endswith(".summary.html") for p in attached), attached
    # Trained on the rows after the last healthy window, not on the stationary ones before.
    assert attempt.rows == 1500 and incident.window_start is not None
    assert pd.Timestamp(attempt.data_window["start"]).timestamp() > incident.window_start
    assert champion_history(cfg)[-1] == "2"

    # The service now serves v2; the next window is judged against v2's baseline and is healthy.
    traffic.send(1500, 72, concept=1.0)
    report = daemon.run_check_now()
    assert report.outcome.champion_version == "2"
    assert report.outcome.result.baseline_accuracy == pytest.approx(
        daemon.champion.get().baseline.metrics["accuracy"])
    assert report.verdict.healthy_for("accuracy") is True, report.verdict.message
    incident = daemon.controller.incidents.get(incident.id)
    assert incident.state == "resolved"
    events = daemon.controller.incidents.events(incident.id)
    kinds = [e["kind"] for e in events if e["kind"] != "attainable_estimate"]
    assert kinds == ["opened", "retraining", "promoted", "resolved"]
    # The retrain on post-change rows measured what is attainable now; one measure decides nothing.
    [estimate] = [e for e in events if e["kind"] == "attainable_estimate"]
    assert estimate["message"].startswith("best attainable accuracy") and estimate["data"]["short_in_a_row"] <= 1
    assert not [e for e in events if e["kind"] == "attainable_level"]
    status = daemon.status()
    assert status["champion"]["version"] == "2" and status["recent_retrains"][0]["status"] == "promoted"


def test_restart_finalises_a_promotion_it_did_not_see(make_config, daemon_for):
    """The daemon died after its child promoted but before it heard back: on start-up the
    registry (versions tagged with the incident) settles the attempt; nothing retrains again."""
    import trainer

    cfg = make_config()
    first = daemon_for(cfg)
    traffic = Traffic(cfg, first.store)
    traffic.send(1500, 80, concept=1.0)
    ctl = first.controller
    incident = ctl.incidents.open("accuracy", "alert", "accuracy dropped")
    ctl.incidents.transition(incident.id, "retraining", "retrain started")
    attempt = ctl.attempts.begin(incident.id, "alert", rows=1500)
    # What the child did before the daemon was killed: a real retrain that promotes.
    outcome = trainer.retrain(cfg, first.store.window(last_n=1500, labelled_only=True), trigger="alert",
                              incident_id=incident.id)
    assert outcome.outcome == "promoted"
    first.stop()

    second = daemon_for(cfg)
    second.start(scheduler=False)  # recovery runs here
    settled = second.controller.attempts.get(attempt.id)
    assert settled.status == "promoted" and settled.challenger_version == outcome.challenger_version
    assert second.controller.incidents.get(incident.id).state == "promoted"
    traffic = Traffic(cfg, second.store, start=traffic.t)
    traffic.send(1500, 81, concept=1.0)
    report = second.run_check_now()
    assert report.outcome.champion_version == outcome.challenger_version
    assert second.controller.incidents.get(incident.id).state == "resolved"
    assert len(second.controller.attempts.for_incident(incident.id)) == 1
    assert champion_history(cfg).count(outcome.challenger_version) == 1
