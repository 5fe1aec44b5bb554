"""The promotion gate per task (trainer/gate.py, trainer/rule_gate.py) on real numbers."""
from __future__ import annotations

import math

import numpy as np
import pytest

from monitor.config import MetricRule, load_config
from trainer.gate import Floors, RegressionFloors, decide_regression, floors_of, judge
from trainer.rule_gate import rule_metrics, rule_regressions

TRAINING = load_config(path=None, environ={}, overrides={}).training  # gate: min_mae_gain 0.02, reference_floor 0.15
GOOD = RegressionFloors(r2=0.9, r2_lower=0.85)


def reg(mae, rmse):
    return {"mae": mae, "rmse": rmse}


@pytest.mark.parametrize("challenger, champion, ref, promote, why", [
    (reg(9.0, 12.0), reg(10.0, 13.0), (5.0, 5.0), True, "MAE -10.00%"),
    (reg(9.9, 12.0), reg(10.0, 13.0), (5.0, 5.0), False, "MAE gain +1.00% < required 2.00%"),
    (reg(9.0, 13.5), reg(10.0, 13.0), (5.0, 5.0), False, "RMSE rises"),
    (reg(9.0, 12.0), reg(10.0, 13.0), (6.0, 5.0), False, "forgets the reference data"),
    (reg(9.0, 12.0), reg(10.0, 13.0), (5.7, 5.0), True, "reference MAE rise +14.00%"),
    (reg(math.nan, 12.0), reg(10.0, 13.0), (5.0, 5.0), False, "undefined"),
])
def test_regression_decision_table(challenger, champion, ref, promote, why):
    decision = judge("regression", challenger, champion, ref[0], ref[1], TRAINING.gate, floors=GOOD)
    assert decision.promote is promote
    assert any(why in r for r in decision.reasons), decision.reasons


def test_regression_floor_refuses_no_better_than_the_mean():
    rng = np.random.default_rng(0)
    y = rng.normal(100, 15, 800)
    useless = floors_of(y, np.full_like(y, y.mean()) + rng.normal(0, 1, 800), 0.5, 0.95, "regression")
    assert isinstance(useless, RegressionFloors) and useless.r2_lower is not None and useless.r2_lower < 0
    decision = decide_regression(reg(11.0, 14.0), reg(30.0, 40.0), 5.0, 5.0, min_mae_gain=0.02, reference_floor=0.15,
                                 floors=useless, concept_holds=False)
    assert not decision.promote and any("R² lower bound" in r for r in decision.reasons)
    good = floors_of(y, y + rng.normal(0, 3, 800), 0.5, 0.95, "regression")
    assert isinstance(good, RegressionFloors) and good.r2_lower is not None and good.r2_lower > 0.9


def test_multiclass_floors_use_the_majority_rate_and_the_macro_auc():
    rng = np.random.default_rng(1)
    y = rng.choice(5, size=1000, p=[0.6, 0.1, 0.1, 0.1, 0.1])
    skilled = np.eye(5)[y] * 3 + rng.normal(0, 1, (1000, 5))
    proba = np.exp(skilled) / np.exp(skilled).sum(axis=1, keepdims=True)
    floors = floors_of(y, proba, 0.5, 0.95, "multiclass")
    assert isinstance(floors, Floors)
    assert floors.majority_rate == pytest.approx((y == 0).mean())
    assert floors.auc_lower is not None and floors.auc_lower > 0.9
    chance = rng.dirichlet(np.ones(5), 1000)  # spreads its guesses: accuracy about 0.2 against a 0.6 majority
    weak = floors_of(y, chance, 0.5, 0.95, "multiclass")
    assert isinstance(weak, Floors) and weak.accuracy_upper is not None and weak.accuracy_upper < weak.majority_rate
    decision = judge("multiclass", {"accuracy": 0.21, "roc_auc": 0.5}, {"accuracy": 0.1, "roc_auc": 0.4}, 0.2, 0.2,
                     TRAINING.gate, floors=weak, concept_holds=False)
    reasons = " | ".join(decision.reasons)
    assert not decision.promote and "majority-class rate" in reasons and "ROC AUC lower bound" in reasons


def test_rule_metrics_and_regressions_per_task():
    y = np.array([0, 0, 1, 1, 2, 2])
    proba = np.eye(3)[[0, 1, 1, 1, 2, 0]] * 0.8 + 0.2 / 3
    m = rule_metrics(y, proba, 0.5, "multiclass", ["a", "b", "c"])
    assert m["recall[a]"] == pytest.approx(0.5) and m["precision[b]"] == pytest.approx(2 / 3)
    assert m["accuracy"] == pytest.approx(4 / 6)
    rules = [MetricRule.model_validate({"metric": "recall", "class": "a", "drop": 0.1})]
    assert rule_regressions(m, {**m, "recall[a]": 0.9}, rules) == \
        ["worse on alerts.rules metric recall[a]: 0.5000 vs champion 0.9000 (drop 0.4000 >= 0.1)"]
    r = rule_metrics(np.array([1.0, 2.0, 3.0]), np.array([1.5, 2.0, 2.0]), 0.5, "regression")
    assert r["mae"] == pytest.approx(0.5) and set(r) == {"mae", "rmse", "mape", "r2"}
    mae_rule = [MetricRule(metric="mae", drop=0.1)]
    assert rule_regressions({"mae": 1.05}, {"mae": 1.0}, mae_rule, "relative") == []
    assert rule_regressions({"mae": 1.2}, {"mae": 1.0}, mae_rule, "relative")  # 20 % higher error: a rise
    assert rule_regressions({"mae": 0.5}, {"mae": 1.0}, mae_rule, "relative") == []  # lower error is better


def test_a_class_with_one_held_out_row_widens_the_macro_auc_band_and_the_gate_still_judges():
    # 20 classes, the rarest with a single held-out row (no DeLong variance for it): the band was
    # undefined, and the gate refused every challenger ("ROC AUC lower bound undefined").
    rng = np.random.default_rng(3)
    k = 20
    y = rng.integers(0, k - 1, 2000)
    y[0] = k - 1
    skilled = np.eye(k)[y] * 3 + rng.normal(0, 1, (2000, k))
    proba = np.exp(skilled) / np.exp(skilled).sum(axis=1, keepdims=True)
    floors = floors_of(y, proba, 0.5, 0.95, "multiclass")
    assert isinstance(floors, Floors) and floors.auc_lower is not None and 0.5 < floors.auc_lower < 0.99
    y[1] = k - 1  # two rows: DeLong's own variance, a narrower band than the single row's bound
    two = floors_of(y, proba, 0.5, 0.95, "multiclass")
    assert isinstance(two, Floors) and two.auc_lower is not None and two.auc_lower > floors.auc_lower - 0.05
    decision = judge("multiclass", {"accuracy": 0.9, "roc_auc": 0.95}, {"accuracy": 0.1, "roc_auc": 0.47}, 0.2, 0.2,
                     TRAINING.gate, floors=floors, concept_holds=False)
    assert not any("undefined" in r for r in decision.reasons), decision.reasons
