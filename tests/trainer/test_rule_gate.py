"""The gate's alerts.rules condition (trainer/rule_gate.py) on real scores."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import f1_score, precision_score, recall_score

from monitor.config import MetricRule
from trainer.rule_gate import rule_metrics, rule_regressions


def test_rule_metrics_agree_with_scikit_learn():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 3000)
    s = np.clip(y * 0.3 + rng.uniform(0, 0.7, y.size), 0, 1)
    m = rule_metrics(y, s, 0.5)
    pred = s > 0.5
    assert m["precision"] == pytest.approx(precision_score(y, pred))
    assert m["recall"] == pytest.approx(recall_score(y, pred))
    assert m["f1"] == pytest.approx(f1_score(y, pred))
    assert m["positive_rate"] == pytest.approx(pred.mean())


def test_a_challenger_worse_on_a_rule_metric_by_its_drop_is_not_promoted():
    rules = [MetricRule(metric="recall", drop=0.05), MetricRule(metric="precision", drop=0.05)]
    champion = {"recall": 0.80, "precision": 0.70}
    assert rule_regressions({"recall": 0.77, "precision": 0.71}, champion, rules) == []  # within the drop
    failed = rule_regressions({"recall": 0.74, "precision": 0.90}, champion, rules)
    assert failed == ["worse on alerts.rules metric recall: 0.7400 vs champion 0.8000 (drop 0.0600 >= 0.05)"]
    assert rule_regressions({"recall": 0.76}, champion, [MetricRule(metric="recall", drop=0.05)], "relative")
    assert rule_regressions({"recall": float("nan")}, champion, rules) == []  # undefined: not compared
