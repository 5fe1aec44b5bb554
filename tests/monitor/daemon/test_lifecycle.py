"""The incident lifecycle cannot stall: every open state has an exit driven by new evidence, also
across a restart; retraining waits for post-change rows; checks judge the champion on its own rows.

Real store, Evidently and MLflow champion; the retrain child is the scripted stand-in
(tests/monitor/daemon/stub_worker.py) told to promote, reject or crash."""
from __future__ import annotations

import pandas as pd
import pytest

from monitor.daemon.decisions.actions import StartKind, Wait, WaitKind
from monitor.daemon.state.incidents import OPEN_STATES, STATES, TRANSITIONS
from tests.monitor.daemon.conftest import Traffic


def test_every_open_state_has_an_exit_and_resolution():
    for state in OPEN_STATES:
        assert TRANSITIONS[state], state
        if state != "retraining":  # a running retrain ends in an outcome first
            assert "resolved" in TRANSITIONS[state], state
    # Resolved goes only back to firing: the same drift reopening its incident (alerts.drift_reopen_seconds).
    assert set(TRANSITIONS) == set(STATES) and TRANSITIONS["resolved"] == ("firing",)
    # From every state a retrain is reachable again (directly or through waiting).
    for state in ("firing", "waiting", "promoted", "rejected", "failed"):
        assert "retraining" in TRANSITIONS[state]


def _restart(make_daemon, daemon, traffic, **kw):
    """A new daemon on the same home (recovery runs on start), traffic going on where it was."""
    daemon.stop(grace=2)
    again, _ = make_daemon(**kw)
    again.start(scheduler=False)
    return again, Traffic(again.cfg, again.store, start=traffic.t)


def _iso(t: float) -> str:
    return pd.Timestamp(t, unit="s", tz="UTC").isoformat()


def test_waits_for_rows_after_the_change_then_trains_on_them_across_a_restart(make_daemon):
    daemon, traffic = make_daemon({"drift": {"window_size": 3000}})
    daemon.start(scheduler=False)
    traffic.send(2000, 50, tag_version=True)
    assert daemon.run_check_now().incident is None
    traffic.send(300, 51, concept=1.0, tag_version=True)  # the change: 300 labelled rows after it
    report = daemon.run_check_now()
    incident = report.incident
    assert report.verdict.fast, report.verdict.message   # found by the change point, before min_labels rows
    assert incident.state == "waiting" and incident.change_ts is not None
    wait = report.action.wait
    assert report.action.retrain is StartKind.WAITING and wait is not None and wait.kind is WaitKind.POST_CHANGE
    assert wait.have is not None and wait.need is not None and 0 < wait.have < wait.need, wait

    daemon, traffic = _restart(make_daemon, daemon, traffic, overrides={"drift": {"window_size": 3000}})
    assert daemon.controller.incidents.get(incident.id).state == "waiting"   # survives the restart
    traffic.send(800, 52, concept=1.0, tag_version=True)
    report = daemon.run_check_now()
    assert report.action.started, report.action
    assert daemon.wait_for_retrain(60)
    [attempt] = daemon.controller.attempts.for_incident(incident.id)
    assert attempt.data_window["since_change"] is not None
    assert 1000 <= attempt.rows <= 1100  # only rows from after the change (a few around it at most)


def test_rejected_retrains_wait_for_new_rows_with_back_off_and_escalate(make_daemon):
    daemon, traffic = make_daemon({"alerts": {"max_attempts": 2, "retry_rows": 200}}, behaviour="reject")
    daemon.start(scheduler=False)
    traffic.send(1500, 60, concept=1.0)
    incident = daemon.run_check_now().incident
    assert daemon.wait_for_retrain(60)
    ctl = daemon.controller
    assert ctl.incidents.get(incident.id).state == "rejected"
    report = daemon.run_check_now()
    assert report.action.retrain is StartKind.WAITING, report.action
    assert report.action.wait == Wait(WaitKind.AFTER_REJECTION, 0, 200), report.action
    traffic.send(200, 61, concept=1.0)
    assert daemon.run_check_now().action.started
    assert daemon.wait_for_retrain(60)
    inc = ctl.incidents.get(incident.id)
    assert inc.state == "rejected" and inc.escalated  # two rejections in a row = alerts.max_attempts
    status = daemon.status()
    assert status["open_incidents"][0]["escalated"] is True
    # Back-off: the next try needs twice the rows; the loop keeps going while escalated.
    assert daemon.run_check_now().action.wait == Wait(WaitKind.AFTER_REJECTION, 0, 400)
    traffic.send(400, 62, concept=1.0)
    assert daemon.run_check_now().action.started


def test_each_retry_learns_from_every_row_since_the_change_up_to_max_rows(make_daemon):
    """Not the check window: all labelled rows after the change point, so a retry sees strictly more
    of the new concept than the try before; training.max_rows bounds it, newest first."""
    overrides = {"drift": {"window_size": 1500}, "alerts": {"retry_rows": 200}, "training": {"max_rows": 2200}}
    daemon, traffic = make_daemon(overrides, behaviour="reject")
    daemon.start(scheduler=False)
    traffic.send(1200, 80, tag_version=True)
    assert daemon.run_check_now().incident is None
    traffic.send(300, 81, concept=1.0, tag_version=True)  # the change, inside one check window
    incident = daemon.run_check_now().incident
    assert incident is not None and incident.change_ts is not None
    traffic.send(1500, 82, concept=1.0, tag_version=True)
    assert daemon.run_check_now().action.started
    assert daemon.wait_for_retrain(60)
    [first] = daemon.controller.attempts.for_incident(incident.id)
    assert first.data_window["since_change"] is not None
    assert 1700 <= first.rows <= 1800  # every row after the change: more than the 1,500-row check window
    traffic.send(600, 83, concept=1.0, tag_version=True)
    assert daemon.run_check_now().action.started
    assert daemon.wait_for_retrain(60)
    _, second = daemon.controller.attempts.for_incident(incident.id)  # in start order
    now = daemon.controller.incidents.get(incident.id)
    # The text people read: the incident's detail tells its outcome, no stale "waiting for".
    assert now.state == "rejected" and now.detail.startswith("rejected"), now.detail
    assert second.rows == 2200  # every row since the change would be more: max_rows, newest first
    assert pd.Timestamp(second.data_window["start"]) > pd.Timestamp(first.data_window["start"])


@pytest.mark.parametrize("state", ["firing", "waiting", "retraining", "promoted", "rejected", "failed"])
def test_a_breaching_model_is_acted_on_after_a_restart_in_every_state(make_daemon, state):
    """Put an incident in ``state`` as a previous daemon left it, restart, send breaching rows: within
    two checks the incident is retraining (or, for a fresh promotion, waiting for its judgement rows
    and then retraining)."""
    daemon, traffic = make_daemon()
    ctl = daemon.controller
    traffic.send(1500, 70, concept=1.0)
    incident = ctl.incidents.open("accuracy", "alert", "accuracy dropped")
    if state == "waiting":
        ctl.incidents.transition(incident.id, "waiting", "waiting for rows")
    elif state != "firing":
        ctl.incidents.transition(incident.id, "retraining", "retrain started")
        attempt = ctl.attempts.begin(incident.id, "alert", rows=1500,
                                     data_window={"end": _iso(traffic.t - traffic.spacing)})
        if state != "retraining":
            ctl.attempts.finish(attempt.id, state, challenger_version="9")
            ctl.incidents.transition(incident.id, state, f"{state}: stand-in")
    daemon, traffic = _restart(make_daemon, daemon, traffic)
    ctl = daemon.controller
    actions = []
    for seed in (71, 72):
        traffic.send(600, seed, concept=1.0)
        actions.append(daemon.run_check_now().action)
        if ctl.incidents.get(incident.id).state == "retraining":
            break
    assert ctl.incidents.get(incident.id).state == "retraining", actions
    assert daemon.wait_for_retrain(60)


def test_checks_judge_the_champion_on_the_rows_it_scored(make_daemon):
    """Rows scored by another version (before a rollback, say) never open an incident against the
    champion; they are reported per version."""
    daemon, traffic = make_daemon({"drift": {"window_size": 3000}})
    daemon.start(scheduler=False)
    traffic.send(1500, 80, concept=1.0)  # breaching rows...
    with daemon.store.write_transaction() as conn:  # ...that version 7 scored, not the champion
        table = daemon.store.tables.predictions.name
        conn.exec_driver_sql(f'UPDATE "{table}" SET model_version = \'7\'')
    report = daemon.run_check_now()
    assert report.outcome.status == "empty" and report.incident is None
    # none scored by champion v1: every row of the window is another version's
    assert (report.outcome.champion_version, report.outcome.window_rows, report.outcome.other_version_rows) == (
        "1", 0, 1500), report.outcome.message
    assert report.outcome.versions["7"]["rows"] == 1500 and report.outcome.versions["7"]["accuracy"] < 0.8
    traffic.send(1500, 81, tag_version=True)  # the champion's own rows: healthy
    report = daemon.run_check_now()
    assert report.outcome.status == "ok" and report.incident is None, report.verdict.message
    assert report.outcome.window_rows == 1500 and report.outcome.other_version_rows == 1500
    assert set(report.outcome.versions) == {"1", "7"} and report.outcome.versions["1"]["accuracy"] > 0.8
    metrics = daemon.registry.get_sample_value
    assert metrics("driftloop_model_version_rows", {"model": "demo", "version": "7"}) == 1500


def test_a_check_is_recorded_with_its_verdict(make_daemon):
    daemon, traffic = make_daemon()
    daemon.start(scheduler=False)
    traffic.send(1500, 90)
    daemon.run_check_now()
    traffic.send(1500, 91, concept=1.0)
    daemon.run_check_now()
    rows = daemon.controller.checklog.recent(10)
    assert rows and all(r["verdict"] for r in rows if r["status"] == "ok")
    assert daemon.status()["last_check"]["verdict"]


def test_the_reference_level_is_kept_across_loop_promotions_and_can_be_reset(make_daemon):
    daemon, traffic = make_daemon()
    daemon.start(scheduler=False)
    traffic.send(1500, 95)
    daemon.run_check_now()
    levels = daemon.controller.levels
    first = levels.read()
    assert first["reference_accuracy"] == pytest.approx(daemon.champion.get().baseline.metrics["accuracy"])
    status = daemon.status()
    assert status["reference_level"]["set_by_version"] == "1"
    # Resetting accepts the champion's baseline (here the same champion: same level, and an event).
    traffic.send(1500, 96, concept=1.0)
    incident = daemon.run_check_now().incident
    answer = daemon.reset_reference()
    assert answer["version"] == "1" and answer["incident"] == incident.id
    assert any(e["kind"] == "reference_reset" for e in daemon.controller.incidents.events(incident.id))


def test_a_drift_incident_becomes_a_performance_incident_when_labels_show_the_drop(make_daemon):
    daemon, traffic = make_daemon()
    daemon.start(scheduler=False)
    df = traffic.send(1500, 97, covariate=1.5, concept=1.0, labelled=0.0)
    incident = daemon.run_check_now().incident
    assert incident.reason == "drift" and not incident.retrain
    daemon.store.add_labels(df[["id", "label", "ts"]])  # the labels arrive: accuracy fell too
    report = daemon.run_check_now()
    inc = daemon.controller.incidents.get(incident.id)
    assert inc.reason in ("accuracy", "roc_auc") and inc.retrain, report.action
    assert report.action.started
    kinds = [e["kind"] for e in daemon.controller.incidents.events(incident.id)]
    assert "reason_changed" in kinds


def test_a_breach_waiting_on_late_labels_says_so_then_retrains_when_they_arrive(make_daemon):
    """Labels arrive late: after a rejected retrain, breaching checks must wait for
    ``alerts.retry_rows`` labelled rows newer than the try's data, which exist only once the labels
    come. The incident is ``waiting``, with the reason (it used to sit in ``rejected``, counted as
    idle breaching checks), across several checks; the late labels then start the retry."""
    daemon, traffic = make_daemon({"alerts": {"retry_rows": 200}}, behaviour="reject")
    daemon.start(scheduler=False)
    traffic.send(1500, 80, concept=1.0)
    incident = daemon.run_check_now().incident
    assert daemon.wait_for_retrain(60)
    ctl = daemon.controller
    assert ctl.incidents.get(incident.id).state == "rejected"
    late = [traffic.send(300, seed, concept=1.0, labelled=0.0) for seed in (81, 82, 83)]  # predictions only
    for _ in late:
        report = daemon.run_check_now()
        assert report.verdict.fire, report.verdict.message  # still breaching on the labelled rows
        inc = ctl.incidents.get(incident.id)
        assert inc.state == "waiting", (inc.state, report.action)
        # The text people read (status shows the incident's detail), made from the wait below.
        assert "waiting for 200 more labelled rows after a rejected retrain" in inc.detail
        assert report.action.wait == Wait(WaitKind.AFTER_REJECTION, 0, 200), report.action
        assert daemon.status()["open_incidents"][0]["state"] == "waiting"
    ctl.store.add_labels(late[0][["id", "label", "ts"]].head(120))  # some labels come: the count moves
    wait = daemon.run_check_now().action.wait
    assert wait == Wait(WaitKind.AFTER_REJECTION, 120, 200), wait
    assert ctl.incidents.get(incident.id).state == "waiting"
    for frame in late:  # the rest arrive
        ctl.store.add_labels(frame[["id", "label", "ts"]])
    report = daemon.run_check_now()
    assert report.action.started, report.action
    assert ctl.incidents.get(incident.id).state == "retraining"
    assert daemon.wait_for_retrain(60)
    kinds = [e["kind"] for e in ctl.incidents.events(incident.id)]
    assert kinds.count("waiting") == 1 and "waiting_progress" in kinds, kinds


def test_a_feature_the_upstream_sends_missing_holds_the_retrain_and_says_which(make_daemon):
    """The upstream breaks and two strong features arrive null in every row: accuracy falls, but a
    retrain on those rows could only fail (the trainer refuses a feature with no value) and would
    fail again after each cooldown. The incident waits instead, naming the features; once rows with
    their values arrive the wait is no longer the pipeline's."""
    daemon, traffic = make_daemon({"drift": {"window_size": 1500}})
    daemon.start(scheduler=False)
    traffic.send(1500, 90, tag_version=True)
    assert daemon.run_check_now().incident is None
    traffic.send(1500, 91, tag_version=True, missing=("x0", "x2"))
    report = daemon.run_check_now()
    incident = report.incident
    assert incident is not None and report.verdict.fire, report.verdict.message
    ctl = daemon.controller
    for seed in (92, 93):  # check after check, nothing is started: no failure, no cooldown, no RetrainFailed
        wait = report.action.wait
        assert report.action.retrain is StartKind.WAITING and wait is not None, report.action
        assert wait.kind is WaitKind.PIPELINE, wait
        inc = ctl.incidents.get(incident.id)
        assert inc.state == "waiting" and "feature(s) x0, x2 have no value" in inc.detail, inc.detail
        assert ctl.attempts.for_incident(incident.id) == []
        traffic.send(300, seed, tag_version=True, missing=("x0", "x2"))
        report = daemon.run_check_now()
    traffic.send(1500, 94, tag_version=True)  # mended: the features are back
    report = daemon.run_check_now()
    wait = report.action.wait if report.action is not None else None
    assert wait is None or wait.kind is not WaitKind.PIPELINE, report.action
