"""Improvement retrains (monitor/daemon/retraining/improve.py) with real parts: the daemon's store,
a real check, a real retrain child (PyTorch on the CPU, MLflow on SQLite). A champion that sits
significantly below the reference level after its incident resolved is retrained on every row
since the change once the evidence grew (training.evidence_growth), at most ``training.improve_below_reference`` times;
a champion at its level, or too little new evidence, starts nothing."""
from __future__ import annotations

import pytest

from monitor.daemon.retraining.improve import shortfall
from tests.monitor.daemon.conftest import Traffic
from tests.monitor.daemon.test_loop import daemon_for  # noqa: F401  (a fixture)


def _resolved_change(ctl, change_ts: float, learnt: int) -> str:
    """A performance incident located at ``change_ts`` whose retrain learnt from ``learnt`` rows, resolved."""
    incident = ctl.incidents.open("accuracy", "alert", "accuracy dropped", change_ts=change_ts)
    attempt = ctl.attempts.begin(incident.id, "alert", rows=learnt, data_window={"rows": learnt})
    ctl.attempts.finish(attempt.id, "rejected", reasons=["test"])
    ctl.resolve(ctl.incidents.get(incident.id), "healthy again")
    assert ctl.incidents.current() is None
    return incident.id


def test_shortfall_needs_the_whole_interval_past_the_level_by_the_margin():
    assert shortfall("accuracy", 0.90, (0.88, 0.92), 0.95) is not None
    assert shortfall("accuracy", 0.93, (0.91, 0.95), 0.95) is None          # the level is inside: noise
    assert shortfall("accuracy", 0.96, (0.95, 0.97), 0.95) is None          # at or above it
    assert shortfall("accuracy", 0.90, (0.88, 0.92), 0.95, margin=0.02) is not None   # 0.03 short
    assert shortfall("accuracy", 0.91, (0.90, 0.935), 0.95, margin=0.02) is None      # within 2 points
    assert shortfall("mae", 4.4, (4.2, 4.6), 4.0) is not None               # an error: above the level
    assert shortfall("mae", 4.4, (4.2, 4.6), 4.0, margin=0.067) is None     # 5 % above: within reach
    assert shortfall("mae", 4.1, (3.9, 4.3), 4.0) is None
    assert shortfall("accuracy", 0.90, None, 0.95) is None                  # no interval, no proof
    assert shortfall("accuracy", 0.90, (0.88, 0.92), None) is None          # no level


def test_a_champion_below_its_level_is_retrained_once_the_evidence_grew(make_config, daemon_for):
    # Wide alert thresholds: the champion is short of its level, but not by a breach (no incident).
    cfg = make_config({"training": {"improve_below_reference": 1, "evidence_growth": 2.5, "improve_margin": 0.2,
                                    "epochs": 8, "patience": 3},
                       "alerts": {"accuracy_drop": 0.15, "auc_drop": 0.3}})
    daemon = daemon_for(cfg)
    daemon.start(scheduler=False)
    ctl = daemon.controller
    traffic = Traffic(cfg, daemon.store)
    change_ts = traffic.t - 1.0
    followed = _resolved_change(ctl, change_ts, learnt=600)
    traffic.send(900, 80)                # 900 labelled rows since the change: fewer than 2.5 x 600
    measured = daemon.run_check_now().outcome.result.accuracy
    ctl.levels.write("1", measured + 0.12, 0.999)  # a level v1 once "reached": it is well short of it
    report = daemon.run_check_now()
    assert report.incident is None and ctl.incidents.current() is None
    assert "improvement retrain after 1500 labelled rows since the change (900 now)" in daemon.improvement.last

    traffic.send(600, 81)                # 1,500 since the change: 2.5 x 600
    daemon.run_check_now()
    opened = ctl.incidents.recent(1)[0]
    assert opened.reason == "improve" and opened.change_ts == pytest.approx(change_ts)
    assert "improvement 1/1" in opened.detail or "improvement 1/1" in daemon.improvement.last
    assert daemon.wait_for_retrain(300)
    attempt = ctl.attempts.for_incident(opened.id)[0]
    assert attempt.status in ("promoted", "rejected"), attempt.error
    assert attempt.rows == 1500                               # every labelled row since the change
    assert attempt.data_window["since_change"] is not None
    assert ctl.incidents.get(opened.id).state == "resolved"  # a requested reason: ends with its retrain
    events = [e["data"] for e in ctl.incidents.events(opened.id) if e["kind"] == "opened"]
    assert events[0]["follows"] == followed and events[0]["learnt"] == 600

    traffic.send(3000, 82)               # grown 2.5 x again, but the bound (1 per change) is reached
    daemon.run_check_now()
    assert [i.reason for i in ctl.incidents.recent(5)].count("improve") == 1


def test_a_champion_at_its_level_is_left_alone(make_config, daemon_for):
    cfg = make_config({"training": {"improve_below_reference": 2}, "alerts": {"accuracy_drop": 0.15, "auc_drop": 0.3}})
    daemon = daemon_for(cfg)
    daemon.start(scheduler=False)
    ctl = daemon.controller
    traffic = Traffic(cfg, daemon.store)
    _resolved_change(ctl, traffic.t - 1.0, learnt=200)
    ctl.levels.write("1", 0.60, 0.60)   # v1 is well above this level
    traffic.send(1500, 83)
    report = daemon.run_check_now()
    assert report.incident is None and ctl.incidents.current() is None
    assert all(i.reason != "improve" for i in ctl.incidents.recent(5))
    assert daemon.improvement.last is None
