"""The daemon's decisions on real data: real store, real Evidently, the real champion from
MLflow, the real scheduler. The retrain child is a scripted stand-in process here (fast);
tests/monitor/daemon/test_loop.py runs the real trainer."""
from __future__ import annotations


import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor.daemon.decisions.actions import ActionKind, StartKind, TriggerKind, Wait, WaitKind
from monitor.daemon.state.attempts import BusyError
from monitor.daemon.runtime.checks import CheckOutcome
from tests.monitor.daemon.conftest import Traffic
from tests.support.waiting import wait_until


def samples(daemon) -> dict[tuple, float]:
    out = {}
    for family in text_string_to_metric_families(generate_latest(daemon.registry).decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "model")))] = s.value
    return out


def test_stationary_traffic_opens_no_incident(make_daemon):
    daemon, traffic = make_daemon()
    daemon.start(scheduler=False)
    for seed in (20, 21, 22):
        traffic.send(1500, seed)
        report = daemon.run_check_now()
        assert report.outcome.status == "ok" and report.verdict.performance_known
        assert report.incident is None, report.verdict.message
    m = samples(daemon)
    assert m[("driftloop_incidents_open", ())] == 0
    assert m[("driftloop_incidents_total", (("reason", "accuracy"),))] == 0
    assert m[("driftloop_model_alert_firing", (("reason", "accuracy"),))] == 0
    assert m[("driftloop_model_champion_info", (("version", "1"),))] == 1
    assert m[("driftloop_model_accuracy", ())] > 0.8
    status = daemon.status()
    assert status["open_incidents"] == [] and status["last_check"]["labelled_rows"] == 1500


def test_too_few_labels_cannot_fire(make_daemon):
    daemon, traffic = make_daemon()
    daemon.start(scheduler=False)
    df = traffic.send(1500, 30, concept=1.0, labelled=0.1)  # 150 labels < drift.min_labels=300
    report = daemon.run_check_now()
    assert report.outcome.labelled_rows == 150 and not report.verdict.performance_known
    assert report.incident is None and report.verdict.labels == (150, 300)
    # The rest of the labels arrive: the same window now has enough of them, and fires.
    daemon.store.add_labels(df[["id", "label", "ts"]].head(1350))
    report = daemon.run_check_now()
    assert report.incident is not None and report.incident.reason == "accuracy"


def test_retry_needs_new_evidence_then_single_flight(make_daemon, clock):
    daemon, traffic = make_daemon({"alerts": {"cooldown_seconds": 600}})
    daemon.start(scheduler=False)
    traffic.send(1500, 40, concept=1.0)
    first = daemon.run_check_now()
    incident = first.incident
    assert incident.reason == "accuracy" and first.action.started
    assert daemon.wait_for_retrain(60)
    assert daemon.controller.incidents.get(incident.id).state == "promoted"
    # The stand-in "promoted" without changing the model: still breaching, but no new labelled rows
    # since that try: it waits for evidence instead of retraining on the same rows (no wall clock involved).
    report = daemon.run_check_now()
    assert report.action.retrain is StartKind.WAITING, report.action
    assert report.action.wait == Wait(WaitKind.NEW_CHAMPION, 0, 300), report.action
    inc = daemon.controller.incidents.get(incident.id)
    # The text people read (status shows the incident's detail): it says what the incident waits for.
    assert inc.state == "waiting" and inc.detail.startswith("waiting for 300 more labelled rows for the new champion")
    assert inc.waits_for == WaitKind.NEW_CHAMPION  # and as data (status, the fleet's queue read it)
    clock.advance(3600)
    for _ in range(2):
        again = daemon.run_check_now().action
        assert (again.kind, again.state, again.retrain) == (ActionKind.STILL_BREACHING, "waiting", StartKind.WAITING)
        assert again.wait == Wait(WaitKind.NEW_CHAMPION, 0, 300), again
    assert daemon.controller.incidents.get(incident.id).attempts == 1
    waits = [e["kind"] for e in daemon.controller.incidents.events(incident.id)
             if e["kind"] in ("waiting", "waiting_progress", "retrain_deferred")]
    assert waits == ["waiting", "waiting_progress"]  # the same wait is recorded once, not at every check
    (daemon.cfg.home / "retrains" / "behaviour").write_text("hang")
    traffic.send(300, 41, concept=1.0)  # new evidence: alerts.retry_rows (default drift.min_labels = 300)
    report = daemon.run_check_now()
    assert report.action.started, report.action
    assert daemon.controller.incidents.get(incident.id).state == "retraining"
    # One retrain at a time: another breaching check waits, a manual request is refused.
    busy = daemon.run_check_now().action
    assert busy.retrain is StartKind.DEFERRED and busy.wait == Wait(WaitKind.RETRAIN_RUNNING), busy
    with pytest.raises(BusyError):
        daemon.retrain_now("manual", "impatient human")
    assert samples(daemon)[("driftloop_retrain_running", ())] == 1
    daemon.stop(grace=2)
    inc = daemon.controller.incidents.get(incident.id)
    assert inc.state == "failed" and inc.attempts == 2
    assert "aborted: the daemon is shutting down" in inc.outcome_reasons[0]
    # Aborted by the shutdown: interrupted, not failed (retried by the next leader, not counted).
    assert daemon.controller.attempts.totals_by_outcome() == {"promoted": 1, "interrupted": 1}


def test_failed_retrain_is_retried_after_the_cooldown_and_escalates(make_daemon, clock):
    daemon, traffic = make_daemon({"alerts": {"cooldown_seconds": 600, "max_attempts": 2}}, behaviour="crash")
    daemon.start(scheduler=False)
    traffic.send(1500, 42, concept=1.0)
    incident = daemon.run_check_now().incident
    assert daemon.wait_for_retrain(60)
    assert daemon.controller.incidents.get(incident.id).state == "failed"
    report = daemon.run_check_now()
    assert report.action.retrain is StartKind.WAITING and report.action.wait == Wait(WaitKind.COOLDOWN)
    clock.advance(601)
    assert daemon.run_check_now().action.started  # no new rows needed after a failure
    assert daemon.wait_for_retrain(60)
    inc = daemon.controller.incidents.get(incident.id)
    assert inc.state == "failed" and inc.escalated  # 2 failures in a row = alerts.max_attempts
    assert samples(daemon)[("driftloop_incident_escalated", ())] == 1
    assert any(e["kind"] == "escalated" for e in daemon.controller.incidents.events(incident.id))
    # Escalation does not stop the loop: after the cooldown it tries again.
    clock.advance(601)
    assert daemon.run_check_now().action.started


def test_drift_without_labels_alerts_without_retraining(make_daemon):
    daemon, traffic = make_daemon({"alerts": {"drift_quiet_checks": 2}})
    daemon.start(scheduler=False)
    traffic.send(1500, 50, covariate=1.5, labelled=0.0)
    report = daemon.run_check_now()
    assert report.incident.reason == "drift" and not report.incident.retrain
    assert report.action.kind is ActionKind.OPENED and report.action.retrain is None, report.action
    assert daemon.controller.attempts.recent() == []
    assert samples(daemon)[("driftloop_model_alert_firing", (("reason", "drift"),))] == 1
    traffic.send(1500, 51, labelled=0.0)  # the inputs look like the reference again
    report = daemon.run_check_now()        # one quiet check does not end the drift episode (hysteresis)
    assert report.incident is not None and not report.verdict.drift.ended, report.action
    traffic.send(1500, 52, labelled=0.0)
    report = daemon.run_check_now()        # alerts.drift_quiet_checks quiet checks in a row do
    assert report.incident is None and report.action.kind is ActionKind.RESOLVED, report.action


def test_drift_that_does_not_hurt_the_model_ends_as_drift_without_impact(make_daemon):
    """The inputs moved for good but the labelled performance holds: after alerts.drift_impact_windows
    judged checks the drift incident is resolved as such, not left open for as long as it lasts."""
    # Thresholds the shifted inputs stay within (this covariate shift costs the model a few points of
    # ROC AUC: wider bars stand for a model the drift does not hurt).
    daemon, traffic = make_daemon({"alerts": {"drift_impact_windows": 2, "accuracy_drop": 0.3, "auc_drop": 0.3},
                                   "drift": {"drift_share": 0.3}})
    daemon.start(scheduler=False)
    traffic.send(1500, 150, covariate=1.5)
    report = daemon.run_check_now()
    incident = report.incident
    assert incident is not None and incident.reason == "drift" and not incident.retrain, (report.action, report.verdict)
    actions = []
    for seed in (151, 152):
        traffic.send(1500, seed, covariate=1.5)
        actions.append(daemon.run_check_now().action)
    assert (actions[0].kind, actions[0].progress) == (ActionKind.NO_IMPACT_PROGRESS, (1, 2)), actions
    assert actions[1].kind is ActionKind.RESOLVED_NO_IMPACT, actions
    resolved = daemon.controller.incidents.get(incident.id)
    # The text people read (status and the incident's history): why it was resolved.
    assert resolved.state == "resolved" and resolved.detail.startswith("drift without performance impact")
    assert resolved.report_paths  # the evidence stays with it
    assert daemon.controller.attempts.recent() == []


def test_no_champion_and_empty_window_are_reported_not_raised(make_daemon):
    daemon, _ = make_daemon(with_champion=False, name="empty-home")
    daemon.start(scheduler=False)
    report = daemon.run_check_now()
    assert report.outcome.status == "no_champion" and "driftloop train" in report.outcome.message
    assert "its 'champion' alias" in report.outcome.message   # versions without the alias: what to set
    assert samples(daemon)[("driftloop_model_check_state", (("state", "no_champion"),))] == 1
    daemon2, _ = make_daemon()
    report = daemon2.run_check_now()
    assert report.outcome.status == "empty" and report.outcome.champion_version == "1"
    assert samples(daemon2)[("driftloop_model_check_errors_total", ())] == 0


def test_failing_checks_are_counted_and_the_job_keeps_running(make_daemon, make_config):
    """The configured schema gained a feature the champion never saw: every evaluation fails."""
    from monitor.config import FeatureSpec

    features = [f.model_dump() for f in make_config().model.features] + [FeatureSpec(name="x8").model_dump()]
    daemon, _ = make_daemon({"model": {"features": features}})
    traffic = Traffic(daemon.cfg, daemon.store)
    import trainer
    from trainer.synthetic import make_dataset
    df = make_dataset(400, seed=60)
    df["x8"] = 0.0
    df["score"] = trainer.load_champion(daemon.cfg).predict_proba(df)
    df["id"] = [f"r{i}" for i in range(len(df))]
    df["ts"] = traffic.t + df.index * 1.0
    daemon.store.add_predictions(df.drop(columns=["label"]))
    daemon.start(check_interval=0.2)  # the real scheduler
    wait_until(lambda: daemon.controller.checklog.error_total() >= 3, 60, 0.1,
               lambda: f"{daemon.controller.checklog.error_total()} check errors")
    last = daemon.controller.checklog.last()
    assert last["status"] == "error" and "x8" in last["message"]
    assert samples(daemon)[("driftloop_model_check_errors_total", ())] >= 3
    # Status reports the interval the scheduler runs on (here the override), not drift.interval_seconds.
    assert daemon.status()["daemon"]["check_interval_seconds"] == 0.2 != daemon.cfg.drift.interval_seconds


def test_scheduled_retrain_opens_and_resolves_its_own_incident(make_daemon):
    daemon, traffic = make_daemon()
    traffic.send(300, 110)
    result = daemon.retrain_now("schedule", "cron 0 3 * * *")
    assert result.action.kind is TriggerKind.OPENED and result.action.started, result.action
    assert result.incident.reason == "schedule" and result.incident.trigger == "schedule"
    assert daemon.wait_for_retrain(60)
    incident = daemon.controller.incidents.get(result.incident.id)
    assert incident.state == "resolved" and incident.version == "2"
    assert daemon.controller.attempts.for_incident(incident.id)[0].trigger == "schedule"


def test_restart_replays_the_policy_streak(make_daemon):
    """sustained_windows=2: one breaching window before a restart and one after open an incident."""
    overrides = {"alerts": {"sustained_windows": 2}}
    daemon, traffic = make_daemon(overrides)
    traffic.send(1500, 120, concept=1.0)
    first = daemon.run_check_now()
    assert first.verdict.performance_streak == 1 and first.incident is None
    daemon.stop()
    again, _ = make_daemon(overrides)
    again.start(scheduler=False)
    report = again.run_check_now()
    assert report.verdict.performance_streak == 2 and report.incident is not None


def test_retention_removes_old_rows_but_no_counts(make_daemon, clock):
    daemon, traffic = make_daemon({"store": {"retention_days": 0.1}})  # 8640 s
    traffic.send(300, 130)
    daemon.controller.checklog.record(CheckOutcome(clock(), "error", "evaluation failed: boom"))
    clock.advance(86_400)
    # Retention counts from when a row was received (the store's own clock, not the injected one).
    with daemon.store.write_transaction() as conn:
        for table in (daemon.store.tables.predictions, daemon.store.tables.labels):
            conn.exec_driver_sql(f'UPDATE "{table.name}" SET received_at = received_at - {86_400 * 10**6}')
    daemon.apply_retention()
    assert daemon.store.row_counts() == {"predictions": 0, "labels": 0}
    assert daemon.controller.checklog.recent() == []
    assert samples(daemon)[("driftloop_model_check_errors_total", ())] == 1


def test_after_a_promotion_a_concept_that_moved_on_is_followed_before_the_evidence_rule(make_daemon):
    """A promotion for a located change makes the next try wait for evidence_growth x its rows; but
    when the new champion's re-scored rows after its training data show the concept moved on (a
    gradual drift), the change point moves there first and the wait is for the rows after it, not
    for 3 x 2,000 rows of a concept that no longer holds."""
    import pandas as pd

    # min_post_change_rows: park the retrain on the post-change wait, so no child starts.
    daemon, traffic = make_daemon({"training": {"evidence_growth": 4.0, "min_post_change_rows": 5000}})
    ctl = daemon.controller
    start = traffic.t
    change_ts = start - 3600.0

    def iso(ts: float) -> str:
        return pd.Timestamp(ts, unit="s", tz="UTC").isoformat()

    incident = ctl.incidents.open("accuracy", "alert", "dropped", change_ts=change_ts)
    # Champion v1 was promoted by this incident's try, which learnt from 2,000 rows ending before `start`.
    window = {"rows": 2000, "since_change": iso(change_ts), "end": iso(start - 1)}
    attempt = ctl.attempts.begin(incident.id, "alert", rows=2000, data_window=window)
    ctl.attempts.finish(attempt.id, "promoted", challenger_version="1", reasons=["test"])
    traffic.send(800, 70)                 # the champion's concept holds for a while...
    step = traffic.t
    traffic.send(800, 71, concept=1.0)    # ...then moves on

    started = ctl.maybe_retrain(ctl.incidents.get(incident.id), "alert")
    moved = ctl.incidents.get(incident.id)
    assert moved.change_ts == pytest.approx(step, abs=60 * traffic.spacing), started.message
    assert started.wait is not None and started.wait.kind == WaitKind.POST_CHANGE, started.message
    assert [e for e in ctl.incidents.events(incident.id) if e["kind"] == "change_point"]

    # Without a later change (the concept holds after the promotion) the evidence rule stands.
    daemon2, traffic2 = make_daemon({"training": {"evidence_growth": 4.0, "min_post_change_rows": 5000}},
                                    name="holds")
    ctl2 = daemon2.controller
    start2 = traffic2.t
    incident2 = ctl2.incidents.open("accuracy", "alert", "dropped", change_ts=start2 - 3600.0)
    window2 = {"rows": 2000, "since_change": iso(start2 - 3600.0), "end": iso(start2 - 1)}
    attempt2 = ctl2.attempts.begin(incident2.id, "alert", rows=2000, data_window=window2)
    ctl2.attempts.finish(attempt2.id, "promoted", challenger_version="1", reasons=["test"])
    traffic2.send(1600, 72)
    held = ctl2.maybe_retrain(ctl2.incidents.get(incident2.id), "alert")
    assert held.wait is not None and held.wait.kind == WaitKind.NEW_CHAMPION, held.message
    assert held.wait.need == 6000 and ctl2.incidents.get(incident2.id).change_ts == pytest.approx(start2 - 3600.0)


def test_a_champion_awaiting_judgement_is_followed_when_its_re_scored_rows_moved_on(make_daemon):
    """A promoted champion is judged on its own labelled rows only once it has drift.min_labels of them;
    meanwhile the labelled rows after its training data, re-scored, can already show the concept moved
    on. Then the incident gets the later change point (and retries); a concept that holds leaves it
    waiting for the judgement."""
    import pandas as pd

    def promoted_incident(daemon, traffic):
        ctl = daemon.controller
        start = traffic.t
        incident = ctl.incidents.open("accuracy", "alert", "dropped", change_ts=start - 3600.0)
        end = pd.Timestamp(start - 1, unit="s", tz="UTC").isoformat()
        window = {"rows": 2000, "since_change": pd.Timestamp(start - 3600.0, unit="s", tz="UTC").isoformat(),
                  "end": end}
        attempt = ctl.attempts.begin(incident.id, "alert", rows=2000, data_window=window)
        ctl.attempts.finish(attempt.id, "promoted", challenger_version="1", reasons=["test"])
        return ctl, ctl.incidents.get(incident.id), start

    daemon, traffic = make_daemon()
    ctl, incident, start = promoted_incident(daemon, traffic)
    traffic.send(700, 73, concept=1.0)        # every row after its training data is of a moved concept
    moved = ctl._moved_on(incident)
    assert moved is not None and moved.change_ts == pytest.approx(start, abs=1.0)
    assert any("the concept moved on" in e["message"] for e in ctl.incidents.events(incident.id))

    daemon2, traffic2 = make_daemon(name="holds")
    ctl2, incident2, _ = promoted_incident(daemon2, traffic2)
    traffic2.send(700, 74)
    assert ctl2._moved_on(incident2) is None
    assert ctl2.incidents.get(incident2.id).change_ts == incident2.change_ts


def test_after_a_promotion_on_post_change_rows_the_evidence_must_grow(make_daemon):
    """training.evidence_growth: a promoted try that learnt from 500 rows since a change is followed
    by one only once those rows reach 4 x 500 (1,500 new); a rejected one, or one on a window of
    recent rows (no change point), waits for drift.min_labels (doubled per rejection)."""
    daemon, _ = make_daemon({"training": {"evidence_growth": 4.0}})
    ctl = daemon.controller
    change_ts = 1796428800.0  # 2026-12-05T00:00:00Z
    incident = ctl.incidents.open("accuracy", "alert", "dropped", change_ts=change_ts)

    def tried(status: str, window: dict) -> list:
        attempt = ctl.attempts.begin(incident.id, "alert", rows=window["rows"], data_window=window)
        ctl.attempts.finish(attempt.id, status, reasons=["test"])
        return [ctl.attempts.get(attempt.id)]

    since = {"rows": 500, "since_change": "2026-12-05T00:00:00+00:00", "end": "2026-12-05T00:04:10+00:00"}
    assert ctl.retry_rows_needed(tried("promoted", since), change_ts) == 1500
    assert ctl.retry_rows_needed(tried("rejected", since), change_ts) == ctl.policy.min_labels
    assert ctl.retry_rows_needed(tried("promoted", {"rows": 1500}), change_ts) == ctl.policy.min_labels
    # A change located after the promoted try's rows (the concept came back): they were another concept's.
    assert ctl.retry_rows_needed(tried("promoted", since), change_ts + 600) == ctl.policy.min_labels
    # The change point refined within them (a batch boundary): the same change, the same growth.
    assert ctl.retry_rows_needed(tried("promoted", since), change_ts + 4) == 1500
    big = {"rows": 40_000, "since_change": "2026-12-05T00:00:00+00:00"}
    assert ctl.retry_rows_needed(tried("promoted", big), change_ts) == daemon.cfg.training.max_rows  # bounded
