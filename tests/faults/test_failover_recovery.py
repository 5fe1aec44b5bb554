"""What the next leader does with the retrain a dead leader left ``running`` (monitor.daemon.retraining.failover),
in process: the real store and MLflow registry (SQLite), the stand-in retrain child. The leader's
death is the state it leaves: an attempt row still running, perhaps a result file, perhaps a
registered version. ``tests/faults/test_failover_retrain.py`` kills real ``driftloop serve``
leaders mid-retrain on PostgreSQL."""
from __future__ import annotations

import json

from mlflow import MlflowClient

from monitor.daemon.decisions.actions import Wait, WaitKind
from monitor.daemon.retraining.failover import COMPLETED, FATE_TAG, ORPHANED
from monitor.files import PRIVATE, atomic_write_json
from tests.monitor.daemon.conftest import Traffic, clock, make_daemon  # noqa: F401  (fixtures)

# An hour of cooldown and escalation after one miss: an interruption must trigger neither.
STRICT = {"alerts": {"cooldown_seconds": 3600, "max_attempts": 1}}


def _left_running(make_daemon, behaviour: str = "promote"):
    """A daemon that 'died' with an incident retraining and its attempt running; returns the
    daemon that leads next (recovery has run), the incident and the attempt."""
    daemon, traffic = make_daemon(STRICT, behaviour=behaviour)
    traffic.send(1500, 70, concept=1.0)
    ctl = daemon.controller
    incident = ctl.incidents.open("accuracy", "alert", "accuracy dropped")
    ctl.incidents.transition(incident.id, "retraining", "retrain (alert) on 1500 rows")
    attempt = ctl.attempts.begin(incident.id, "alert", rows=1500, data_window={"rows": 1500})
    return daemon, incident, attempt


def _lead(make_daemon, daemon, behaviour: str = "promote"):
    daemon.stop(grace=2)  # nothing of ours runs: the attempt row stays 'running', as a SIGKILL leaves it
    again, _ = make_daemon(STRICT, behaviour=behaviour)
    again.start(scheduler=False)  # recovery, as on being elected leader
    return again


def _register_orphan(cfg, incident_id: str, attempt_id: str) -> str:
    """What a child killed between registration and the gate leaves: a version of a run of this
    attempt, with no ``driftloop.outcome``."""
    client = MlflowClient(tracking_uri=cfg.tracking_uri, registry_uri=cfg.tracking_uri)
    experiment = client.get_experiment_by_name(cfg.experiment_name)
    run = client.create_run(experiment.experiment_id, tags={
        "driftloop.incident_id": incident_id, "driftloop.kind": "retrain",
        "driftloop.data_window": json.dumps({"rows": 1500, "attempt_id": attempt_id})})
    source = cfg.home / "mlruns-orphan" / run.info.run_id  # never loaded: the fate is a tag
    return str(client.create_model_version(cfg.registered_model_name, str(source), run_id=run.info.run_id).version)


def test_an_interrupted_retrain_is_retried_at_once_and_not_counted(make_daemon):
    daemon, incident, attempt = _left_running(make_daemon)
    daemon = _lead(make_daemon, daemon)
    ctl = daemon.controller
    first, retry = ctl.attempts.for_incident(incident.id)
    assert first.id == attempt.id and first.status == "interrupted", first
    assert "the leader died" in first.error
    assert retry.status in ("running", "promoted")  # retried at once, despite an hour of cooldown
    assert daemon.wait_for_retrain(60)
    assert [a.status for a in ctl.attempts.for_incident(incident.id)] == ["interrupted", "promoted"]
    now = ctl.incidents.get(incident.id)
    assert now.state == "promoted" and not now.escalated  # alerts.max_attempts = 1: not a miss
    kinds = [e["kind"] for e in ctl.incidents.events(incident.id)]
    assert kinds[-3:] == ["failed", "retraining", "promoted"], kinds
    assert ctl.attempts.totals_by_outcome().get("failed", 0) == 0


def test_after_an_interruption_a_breach_retrains_at_once_after_a_failure_it_waits(make_daemon):
    """When the retry could not start at once, the next breaching check starts it: no cooldown and
    no new labelled rows needed, unlike after a failure of training itself."""
    daemon, traffic = make_daemon(STRICT)
    daemon.start(scheduler=False)
    traffic.send(1500, 70, concept=1.0)
    ctl = daemon.controller
    said = {}
    for status in ("failed", "interrupted"):
        incident = ctl.incidents.open("accuracy", "alert", "accuracy dropped")
        ctl.incidents.transition(incident.id, "retraining", "retrain (alert) on 1500 rows")
        tried = ctl.attempts.begin(incident.id, "alert", rows=1500, data_window={"rows": 1500})
        ctl.attempts.finish(tried.id, status, error=status)
        ctl.incidents.transition(incident.id, "failed", status)
        said[status] = ctl.maybe_retrain(ctl.incidents.get(incident.id), "alert")
        if status == "failed":
            ctl.resolve(ctl.incidents.get(incident.id), "next case")
    assert said["failed"].attempt is None and said["failed"].wait == Wait(WaitKind.COOLDOWN), said["failed"]
    assert said["interrupted"].attempt is not None, said["interrupted"].message
    assert daemon.wait_for_retrain(60)


def test_the_result_the_child_left_is_the_outcome(make_daemon):
    daemon, incident, attempt = _left_running(make_daemon)
    atomic_write_json(daemon.cfg.home / "retrains" / attempt.id / "result.json", {"status": "ok", "outcome": {
        "outcome": "rejected", "challenger_version": "7", "champion_version": "1", "run_id": "r7",
        "reasons": ["accuracy gain +0.0010 < required 0.0100"], "duration_seconds": 3.0}}, mode=PRIVATE)
    daemon = _lead(make_daemon, daemon)
    ctl = daemon.controller
    [settled] = ctl.attempts.for_incident(incident.id)  # a verdict: not retried behind the gate's back
    assert settled.status == "rejected" and settled.challenger_version == "7"
    assert ctl.incidents.get(incident.id).state == "rejected"


def test_a_version_registered_before_the_gate_is_tagged_orphaned_and_the_retrain_retried(make_daemon):
    daemon, incident, attempt = _left_running(make_daemon)
    orphan = _register_orphan(daemon.cfg, incident.id, attempt.id)
    daemon = _lead(make_daemon, daemon)
    ctl = daemon.controller
    first = ctl.attempts.get(attempt.id)
    assert first.status == "interrupted" and f"version(s) {orphan}" in first.error, first.error
    client = MlflowClient(tracking_uri=daemon.cfg.tracking_uri)
    assert client.get_model_version(daemon.cfg.registered_model_name, orphan).tags[FATE_TAG] == ORPHANED
    run_id = client.get_model_version(daemon.cfg.registered_model_name, orphan).run_id
    assert client.get_run(run_id).info.status == "KILLED"  # was RUNNING in the MLflow UI for good
    assert daemon.wait_for_retrain(60)
    assert [a.status for a in ctl.attempts.for_incident(incident.id)] == ["interrupted", "promoted"]


def test_a_version_past_the_gate_is_completed_by_the_new_leader(make_daemon):
    """The child recorded its verdict on the version, then died before its result file: the
    verdict stands (rejected here), tagged as completed by the new leader, and nothing is retried."""
    daemon, incident, attempt = _left_running(make_daemon)
    version = _register_orphan(daemon.cfg, incident.id, attempt.id)
    client = MlflowClient(tracking_uri=daemon.cfg.tracking_uri)
    for key, value in (("driftloop.outcome", "rejected"), ("driftloop.reasons", "no better than the champion")):
        client.set_model_version_tag(daemon.cfg.registered_model_name, version, key, value)
    daemon = _lead(make_daemon, daemon)
    ctl = daemon.controller
    [settled] = ctl.attempts.for_incident(incident.id)
    assert settled.status == "rejected" and settled.challenger_version == version
    assert "no better than the champion" in settled.reasons
    tags = client.get_model_version(daemon.cfg.registered_model_name, version).tags
    assert tags[FATE_TAG] == f"{COMPLETED}: rejected"
