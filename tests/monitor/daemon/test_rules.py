"""alerts.rules on the real daemon: a rule's breach opens an incident named after its metric and
goes through the lifecycle like an accuracy drop. Real store, real Evidently, the real champion
from MLflow; the retrain child is the scripted stand-in."""
from __future__ import annotations

import pytest

from monitor.config import AlertsConfig, MetricRule
from monitor.daemon.decisions.policy import AlertPolicy, Observation
from monitor.daemon.runtime.views import render_status
from tests.monitor.daemon.test_controller import samples

# The default pair made deaf, so only the rule can speak.
DEAF = {"accuracy_drop": 0.9, "auc_drop": 0.9}


def test_a_recall_rule_opens_a_recall_incident_that_retrains(make_daemon):
    daemon, traffic = make_daemon({"alerts": {**DEAF, "rules": [{"metric": "recall", "drop": 0.06},
                                                                {"metric": "f1", "drop": 0.9}]}})
    daemon.start(scheduler=False)
    traffic.send(1500, 20)
    quiet = daemon.run_check_now()
    assert quiet.incident is None and quiet.verdict.performance_known, quiet.verdict.message
    assert [r.metric for r in quiet.verdict.rules] == ["recall", "f1"]
    assert not any(r.breached for r in quiet.verdict.rules)
    m = samples(daemon)
    assert m[("driftloop_model_rule_breached", (("metric", "recall"),))] == 0
    assert m[("driftloop_model_rule_threshold", (("metric", "recall"),))] == 0.06

    traffic.send(1500, 21, concept=1.0)
    report = daemon.run_check_now()
    r = report.outcome.result
    assert r.accuracy > r.baseline_accuracy - 0.9          # the pair stays quiet ...
    recall = next(x for x in report.verdict.rules if x.metric == "recall")
    assert recall.breached and recall.bar == pytest.approx(r.baselines["recall"])
    assert recall.drop == pytest.approx(r.baselines["recall"] - r.recall)
    incident = report.incident                              # ... and the rule opens the incident
    assert incident is not None and incident.reason == "recall", report.verdict.message
    assert "recall" in report.verdict.firing and report.action.started, report.action
    m = samples(daemon)
    assert m[("driftloop_model_rule_breached", (("metric", "recall"),))] == 1
    assert m[("driftloop_model_rule_breached", (("metric", "f1"),))] == 0
    assert m[("driftloop_model_alert_firing", (("reason", "recall"),))] == 1
    assert m[("driftloop_incidents_total", (("reason", "recall"),))] == 1
    text = render_status(daemon.status())
    assert "recall" in text and incident.id in text
    assert daemon.wait_for_retrain(60)
    settled = daemon.controller.incidents.get(incident.id)
    assert settled.state in ("promoted", "resolved") and settled.reason == "recall"


def _obs(**kw):
    base = dict(labelled_rows=2000, accuracy=0.9, baseline_accuracy=0.9, roc_auc=0.95, baseline_roc_auc=0.95,
                metrics={"precision": 0.8, "recall": 0.70, "f1": 0.75, "positive_rate": 0.30},
                baselines={"precision": 0.8, "recall": 0.80, "f1": 0.80, "positive_rate": 0.30})
    return Observation(**{**base, **kw})


def test_rules_are_judged_only_with_enough_labels_and_name_their_metric():
    alerts = AlertsConfig(rules=[MetricRule(metric="recall", drop=0.05), MetricRule(metric="precision", drop=0.05)])
    verdict = AlertPolicy(alerts, min_labels=1000).observe(_obs())
    assert verdict.fire and verdict.reason == "recall" and verdict.firing == ("recall",)
    (b,) = verdict.breaches
    assert (b.key, b.value, b.against, b.baseline) == ("recall", 0.70, "reference sample", 0.80)
    assert verdict.healthy_for("recall") is False and verdict.healthy_for("performance") is False
    few = AlertPolicy(alerts, min_labels=1000).observe(_obs(labelled_rows=999))
    assert not few.fire and few.rules == () and few.healthy_for("recall") is None
    # Relative mode: 0.10 / 0.80 = 12.5 % >= 5 %; a relative drop of 10 % is below 12.5 %.
    rel = AlertsConfig(mode="relative", rules=[MetricRule(metric="recall", drop=0.125)])
    assert AlertPolicy(rel, min_labels=1000).observe(_obs()).reason == "recall"
    assert not AlertPolicy(rel, min_labels=1000).observe(_obs(metrics={"recall": 0.72})).fire


def test_an_accuracy_rule_tightens_the_default_pair_and_the_pair_speaks_first():
    tight = AlertsConfig(rules=[MetricRule(metric="accuracy", drop=0.01)])
    verdict = AlertPolicy(tight, min_labels=1000).observe(_obs(accuracy=0.88, metrics={}))
    assert verdict.reason == "accuracy" and len(verdict.breaches) == 1
    both = AlertsConfig(rules=[MetricRule(metric="accuracy", drop=0.01)])
    verdict = AlertPolicy(both, min_labels=1000).observe(_obs(accuracy=0.80, metrics={}))
    assert [b.threshold for b in verdict.breaches] == [0.03]  # the pair's own breach, not a duplicate


def test_a_positive_rate_rule_with_no_bar_is_read_but_never_breaches():
    alerts = AlertsConfig(rules=[MetricRule(metric="positive_rate", drop=0.05)])
    verdict = AlertPolicy(alerts, min_labels=1000).observe(_obs(baselines={}))
    assert not verdict.fire and verdict.rules[0].bar is None and not verdict.rules[0].breached


def test_a_rule_streak_survives_a_restart(make_daemon):
    from tests.monitor.daemon.test_lifecycle import _restart
    overrides = {"alerts": {**DEAF, "sustained_windows": 2, "rules": [{"metric": "recall", "drop": 0.06}]}}
    daemon, traffic = make_daemon(overrides)
    daemon.start(scheduler=False)
    traffic.send(1500, 21, concept=1.0)
    first = daemon.run_check_now()
    assert not first.verdict.fire and first.verdict.performance_streak == 1, first.verdict.message
    daemon, traffic = _restart(make_daemon, daemon, traffic, overrides=overrides)   # streaks replayed from the log
    second = daemon.run_check_now()
    assert second.verdict.fire and second.incident is not None and second.incident.reason == "recall"


def test_a_rule_on_a_labelled_figure_moves_with_labels_chosen_by_the_score_and_the_served_rate_does_not():
    """Reviewed rows (monitor.drift.selection): the recall of rows a person chose to review is
    expected far above the reference sample's, so its bar rises with them; the served positive
    rate is a figure of every row and keeps its bar."""
    alerts = AlertsConfig(rules=[MetricRule(metric="recall", drop=0.05), MetricRule(metric="positive_rate", drop=0.05)])
    chosen = {"recall": 0.15}   # what monitor.drift.selection estimates: never the served positive rate
    v = AlertPolicy(alerts, min_labels=1000).observe(_obs(metrics={"recall": 0.90, "positive_rate": 0.30},
                                                          selection=chosen))
    assert v.fire and v.reason == "recall", v.message       # 0.90 vs 0.95 for these rows
    (b,) = v.breaches
    assert b.baseline == pytest.approx(0.95) and "moved +0.1500 for labels chosen by the score" in b.against
    assert {r.metric: r.bar for r in v.rules}["positive_rate"] == 0.30
    assert not AlertPolicy(alerts, min_labels=1000).observe(_obs(metrics={"recall": 0.90, "positive_rate": 0.30})).fire
