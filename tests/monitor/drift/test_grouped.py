"""Per-group statistics in bincount passes (monitor/drift/grouped.py) against the per-value
computation they replace: scikit-learn's ROC AUC and monitor.drift.estimation on each value's rows."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from monitor.drift.estimation import estimate, fit_calibrator
from monitor.drift.grouped import grouped_estimate, grouped_labelled, js_distance, noise_floor, row_classes


@pytest.fixture(scope="module")
def rows():
    rng = np.random.default_rng(3)
    n, k = 60_000, 7
    codes = rng.integers(0, k, n)
    y = rng.integers(0, 2, n).astype(np.float64)
    score = np.clip(0.5 + (y - 0.5) * (0.2 + 0.08 * codes) + rng.normal(0, 0.25, n), 0, 1)
    score[rng.uniform(size=n) < 0.1] = 0.5                 # ties
    labelled = rng.uniform(size=n) < 0.6
    return codes, k, y, score, labelled


def test_one_bincount_gives_every_labelled_figure_per_value(rows):
    codes, k, y, score, labelled = rows
    pred = score > 0.5
    correct = (pred == y)[labelled]
    classes, s = row_classes(labelled, y[labelled], correct, score[labelled])
    g = grouped_labelled(codes, k, classes, s)
    for v in range(k):
        m, ml = codes == v, (codes == v) & labelled
        assert g["rows"][v] == m.sum() and g["labelled"][v] == ml.sum()
        assert g["correct"][v] == (pred == y)[ml].sum()
        assert g["positives"][v] == y[ml].sum() and g["hits"][v] == (pred & (y == 1))[ml].sum()
        assert g["roc_auc"][v] == pytest.approx(roc_auc_score(y[ml], score[ml]), abs=0.002)
    one_class = grouped_labelled(np.zeros(3, dtype=np.int64), 1, *row_classes(np.ones(3, bool), np.ones(3),
                                                                               np.ones(3, bool), np.arange(3.0)))
    assert np.isnan(one_class["roc_auc"][0])


def test_grouped_estimate_is_cbpe_on_each_value(rows):
    codes, k, y, score, _ = rows
    cal = fit_calibrator(y[:5000], score[:5000])
    pred = (score > 0.5).astype(np.int64)
    p = cal(score)
    q = np.where(pred == 1, p, 1 - p)
    acc, half = grouped_estimate(codes, k, q, q * (1 - q), cal.bins(score), cal.counts, 0.95)
    for v in range(k):
        m = codes == v
        e = estimate(cal, score[m], pred[m], 0.95)
        assert acc[v] == pytest.approx(e.accuracy, abs=1e-12)
        assert acc[v] - half[v] == pytest.approx(e.accuracy_ci[0], abs=1e-12)


def test_jensen_shannon_matches_scipy_and_the_noise_floor_holds():
    from scipy.spatial.distance import jensenshannon
    a, b = np.array([5.0, 3, 2, 0]), np.array([1.0, 1, 1, 1])
    assert js_distance(a, b) == pytest.approx(jensenshannon(a, b))
    rng = np.random.default_rng(0)
    same = [js_distance(np.bincount(rng.integers(0, 10, 400), minlength=10).astype(float),
                        np.bincount(rng.integers(0, 10, 5000), minlength=10).astype(float)) for _ in range(200)]
    assert np.median(same) == pytest.approx(float(noise_floor(10, 400, 5000)), rel=0.25)


def test_grouped_errors_are_each_values_mae_and_t_interval():
    from scipy.stats import t

    from monitor.drift.grouped import grouped_errors
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 4, size=2000)
    errors = np.abs(rng.normal(0, 1 + codes, size=2000))
    errors[rng.uniform(size=2000) < 0.3] = np.nan          # unlabelled rows
    codes[codes == 3] = 2                                  # value 3: no rows at all
    codes[:1] = 3
    errors[:1] = 0.5                                       # ... but one labelled row: no interval
    mean, half = grouped_errors(codes, 5, errors, 0.95)
    for k in range(3):
        e = errors[(codes == k) & np.isfinite(errors)]
        assert mean[k] == pytest.approx(e.mean())
        assert half[k] == pytest.approx(t.ppf(0.975, len(e) - 1) * e.std(ddof=1) / np.sqrt(len(e)))
    assert mean[3] == 0.5 and np.isnan(half[3])
    assert np.isnan(mean[4]) and np.isnan(half[4])
