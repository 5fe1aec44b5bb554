import math

import numpy as np
import pytest
from scipy.stats import binom, norm
from sklearn.metrics import roc_auc_score

from monitor.stats import (accuracy, binary_metrics, delong_auc, labels_needed, log_loss, performance, roc_auc,
                           wilson_interval)


@pytest.mark.parametrize("k,n,conf", [(0, 10, 0.95), (3, 10, 0.9), (81, 263, 0.95), (950, 1000, 0.99), (10, 10, 0.95)])
def test_wilson_is_the_score_interval(k, n, conf):
    """Each end is where the score test is exactly significant: |p_hat - p| = z sqrt(p (1 - p) / n)."""
    low, high = wilson_interval(k, n, conf)
    z, p_hat = norm.ppf(0.5 + conf / 2), k / n
    for bound in (low, high):
        assert abs(p_hat - bound) == pytest.approx(z * math.sqrt(bound * (1 - bound) / n), abs=1e-9)
    assert low <= p_hat <= high and 0.0 <= low and high <= 1.0


@pytest.mark.parametrize("c", [0.9, 0.95, 0.99])
def test_one_sided_bound_at_c_is_the_two_sided_interval_at_2c_minus_1(c):
    """What the change-point fast lane and the promotion gate rely on: the upper end of the interval
    at 2c - 1 is the one-sided upper bound at c (the score statistic there is z_c, one tail 1 - c)."""
    k, n = 170, 200
    _, upper = wilson_interval(k, n, 2 * c - 1)
    score = (upper - k / n) / math.sqrt(upper * (1 - upper) / n)
    assert score == pytest.approx(norm.ppf(c), abs=1e-9)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1.5])
def test_wilson_rejects_a_confidence_outside_0_1(bad):
    with pytest.raises(ValueError, match="confidence must be in"):
        wilson_interval(5, 10, bad)


def test_wilson_undefined_without_rows():
    assert wilson_interval(0, 0) is None


def _brute_force_delong(y, s):
    """DeLong's structural components straight from the definition, O(m n)."""
    pos, neg = s[y == 1], s[y == 0]
    psi = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)
    return psi.mean(), v10.var(ddof=1) / len(pos) + v01.var(ddof=1) / len(neg)


def test_delong_matches_definition_and_sklearn_with_ties():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 300)
    s = np.round(rng.normal(y * 0.8, 1.0), 1)  # rounding makes many ties
    est = delong_auc(y, s)
    auc, var = _brute_force_delong(y, s)
    assert est.auc == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert est.auc == pytest.approx(auc, abs=1e-12)
    assert est.variance == pytest.approx(var, rel=1e-9)


def test_auc_undefined_for_one_class_and_no_interval_for_singletons():
    assert delong_auc(np.ones(5), np.linspace(0, 1, 5)) is None
    est = delong_auc(np.array([1, 0, 0]), np.array([0.9, 0.1, 0.2]))
    assert est.auc == 1.0 and est.interval() is None


def test_intervals_cover_the_truth_at_their_level():
    # Binormal scores: negatives N(0,1), positives N(d,1) -> true AUC = Phi(d / sqrt(2)).
    rng = np.random.default_rng(7)
    d, n, reps, p_true = 1.0, 400, 300, 0.85
    auc_true = norm.cdf(d / math.sqrt(2))
    auc_hits = acc_hits = 0
    for _ in range(reps):
        y = rng.integers(0, 2, n)
        s = rng.normal(d * y, 1.0)
        pred = np.where(rng.uniform(size=n) < p_true, y, 1 - y)
        perf = performance(y, pred, s, confidence=0.95)
        lo, hi = perf.roc_auc_ci
        auc_hits += lo <= auc_true <= hi
        lo, hi = perf.accuracy_ci
        acc_hits += lo <= p_true <= hi
    # 300 replications: a 95% interval's coverage estimate has sd ~1.3 points.
    assert 0.91 <= auc_hits / reps <= 0.985
    assert 0.91 <= acc_hits / reps <= 0.985


def test_performance_values_and_ordering():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 2000)
    s = np.clip(rng.normal(0.35 + 0.3 * y, 0.2), 0, 1)
    pred = (s >= 0.5).astype(int)
    perf = performance(y, pred, s, confidence=0.9)
    assert perf.accuracy == pytest.approx((pred == y).mean())
    assert perf.roc_auc == pytest.approx(roc_auc_score(y, s))
    assert perf.accuracy_ci[0] < perf.accuracy < perf.accuracy_ci[1]
    assert perf.roc_auc_ci[0] < perf.roc_auc < perf.roc_auc_ci[1]
    wider = performance(y, pred, s, confidence=0.99)
    assert wider.accuracy_ci[0] < perf.accuracy_ci[0] and wider.roc_auc_ci[1] > perf.roc_auc_ci[1]


def test_labels_needed_gives_the_power_it_promises():
    n = labels_needed(0.85, 0.03)  # one-sided, alpha 0.05, power 0.8: the drift.min_labels argument
    assert 850 <= n <= 1000
    # Exact binomial check: reject "accuracy = 0.85" when correct counts fall at/below the 5% quantile.
    crit = binom.ppf(0.05, n, 0.85)
    power = binom.cdf(crit, n, 0.82)
    assert 0.75 <= power <= 0.85
    assert labels_needed(0.85, 0.03, one_sided=False) > n
    with pytest.raises(ValueError):
        labels_needed(0.85, 0.9)


def test_trainer_metrics_match_scikit_learn_and_are_the_monitors():
    """One metrics module: the trainer's ROC AUC is the monitor's (DeLong's mid-ranks), and both
    agree with scikit-learn, ties included."""
    from sklearn.metrics import accuracy_score
    from sklearn.metrics import log_loss as sk_log_loss

    import trainer.metrics
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 500)
    proba = np.round(rng.random(500), 2)  # rounded: many ties
    assert roc_auc(y, proba) == pytest.approx(roc_auc_score(y, proba), abs=1e-12)
    assert roc_auc(y, proba) == delong_auc(y, proba).auc
    assert accuracy(y, proba) == pytest.approx(accuracy_score(y, proba > 0.5))
    assert log_loss(y, proba) == pytest.approx(sk_log_loss(y, np.clip(proba, 1e-7, 1 - 1e-7)), rel=1e-9)
    assert math.isnan(roc_auc(np.ones(5), proba[:5]))
    assert binary_metrics(y, proba)["roc_auc"] == roc_auc(y, proba)
    assert trainer.metrics.binary_metrics is binary_metrics
