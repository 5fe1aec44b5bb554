"""Incidents that can end after a change of concept: the attainable level (issue 34, item 1)."""
from __future__ import annotations

import json

import pandas as pd

import pytest

from monitor.daemon.decisions.attainable import Attainable, attainable_from, bar_of


def test_the_attainable_figure_is_the_better_model_with_its_interval():
    a = attainable_from({"challenger_accuracy": 0.61, "champion_accuracy": 0.58, "holdout_rows": 2000,
                         "challenger_roc_auc": 0.70, "champion_roc_auc": 0.72}, "accuracy")
    assert a is not None and a.value == 0.61 and a.roc_auc == 0.72 and a.rows == 2000
    assert a.lower == pytest.approx(0.61 - 1.96 * (0.61 * 0.39 / 2000) ** 0.5)
    assert a.short_of(0.770, 0.03) and not a.short_of(0.64, 0.03)  # upper end 0.631: within 0.03 of 0.64
    m = attainable_from({"challenger_mae": 7.0, "champion_mae": 9.0, "holdout_rows": 400}, "mae")
    assert m is not None and m.value == 7.0 and m.best_end == m.lower == pytest.approx(7.0 - 1.96 * 7.0 / 20)
    assert m.short_of(5.0, 0.10) and not m.short_of(6.5, 0.10)
    assert attainable_from({"challenger_accuracy": float("nan"), "holdout_rows": 10}, "accuracy") is None
    assert attainable_from({"challenger_accuracy": 0.6}, "accuracy") is None  # no held-out size: no interval
    assert bar_of("accuracy", 0.77, 0.70) == 0.77 and bar_of("mae", 5.0, 6.0) == 5.0
    assert bar_of("mae", None, None) is None
    assert "± 0.0214" in Attainable("accuracy", 0.61, 0.5886, 0.6314, 2000).describe()


def test_retrains_that_cannot_reach_the_old_level_record_the_attainable_one_and_end_the_incident(make_daemon):
    daemon, traffic = make_daemon({"alerts": {"attainable_after": 2, "retry_rows": 200, "max_attempts": 5}},
                                  behaviour="reject")
    daemon.start(scheduler=False)
    ctl = daemon.controller
    traffic.send(1200, 80, tag_version=True)
    assert daemon.run_check_now().incident is None
    changed = traffic.send(300, 81, concept=1.0, tag_version=True)  # the change, inside one check window
    incident = daemon.run_check_now().incident
    assert incident is not None and incident.change_ts is not None and incident.reason == "accuracy"
    after = traffic.send(1500, 82, concept=1.0, tag_version=True)
    rows = pd.concat([changed, after])
    reached = float(((rows["score"] > 0.5).astype(int) == rows["label"]).mean())  # the champion after the change
    # What the retrains find: the best model reaches barely more than the champion on post-change rows.
    (ctl.cfg.home / "retrains" / "metrics.json").write_text(json.dumps(
        {"challenger_accuracy": reached + 0.005, "champion_accuracy": reached, "challenger_roc_auc": 0.6,
         "champion_roc_auc": 0.58, "holdout_rows": 1500}))
    assert daemon.run_check_now().action.started
    assert daemon.wait_for_retrain(60)
    assert ctl.incidents.get(incident.id).state == "rejected"      # one short retrain: not yet a decision
    assert ctl.levels.read().get("reference_attainable_version") is None
    traffic.send(200, 83, concept=1.0, tag_version=True)
    assert daemon.run_check_now().action.started
    assert daemon.wait_for_retrain(60)
    ended = ctl.incidents.get(incident.id)
    assert ended.state == "resolved", ended
    decision = [e for e in ctl.incidents.events(incident.id) if e["kind"] == "attainable_level"]
    assert len(decision) == 1 and "the concept changed; the best attainable accuracy" in decision[0]["message"]
    assert decision[0]["data"]["value"] == pytest.approx(reached + 0.005)
    level = daemon.status()["reference_level"]
    assert level["attainable"] is True and level["accuracy"] == pytest.approx(reached + 0.005)
    # Later windows of the new concept are judged against the attainable level: no new incident.
    traffic.send(1500, 84, concept=1.0, tag_version=True)
    report = daemon.run_check_now()
    assert report.incident is None and ctl.incidents.current() is None, report.action


def test_without_post_change_evidence_or_when_disabled_nothing_is_decided(make_daemon):
    daemon, traffic = make_daemon({"alerts": {"attainable_after": 0, "retry_rows": 200}}, behaviour="reject")
    daemon.start(scheduler=False)
    ctl = daemon.controller
    (ctl.cfg.home / "retrains" / "metrics.json").write_text(json.dumps(
        {"challenger_accuracy": 0.3, "champion_accuracy": 0.3, "holdout_rows": 1500}))
    traffic.send(1500, 90, concept=1.0)
    incident = daemon.run_check_now().incident
    assert daemon.wait_for_retrain(60)
    for seed in (91, 92):
        traffic.send(400, seed, concept=1.0)
        daemon.run_check_now()
        assert daemon.wait_for_retrain(60)
    assert ctl.incidents.get(incident.id).is_open
    assert not [e for e in ctl.incidents.events(incident.id) if e["kind"].startswith("attainable")]
