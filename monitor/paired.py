"""Paired tests: two models scored on the same rows. Which one is better, beyond chance?

- :func:`mcnemar`: accuracy. Only the rows where exactly one model is right carry information
  (``b``: only A right, ``c``: only B right); under "equally accurate" each such row goes either
  way with probability 1/2, so the exact two-sided p-value is a binomial tail (McNemar 1947; the
  exact form needs no continuity correction and is right for small ``b + c``).
- :func:`paired_delong`: ROC AUC. DeLong, DeLong & Clarke-Pearson (1988): the two AUCs' structural
  components on the same positives and negatives are correlated, and the variance of the
  difference uses their covariance; a normal test on it. Built on the mid-rank components of
  :func:`monitor.stats.delong_auc`.
- :func:`paired_macro_delong`: one-vs-rest macro ROC AUC of a multiclass model. The mean over the
  classes of DeLong's paired difference per class; its variance is the sum of the per-class
  variances over K², as if the classes were independent (they share rows, so it is approximate,
  the same approximation :func:`monitor.taskstats.macro_auc` makes for its band). Exact
  covariances across classes would cost K² component products for little: it is one of two
  criteria, and accuracy (McNemar, exact) is the other.
- :func:`paired_errors`: mean absolute error (regression), a paired t test on the per-row
  difference of absolute errors. Chosen over Wilcoxon's signed-rank test because it tests exactly
  the MAE difference that is reported and judged (Wilcoxon tests the differences' pseudo-median,
  which can favour one model while the MAE favours the other when errors are skewed), and the
  paired rows are hundreds (``drift.min_rows`` and more), where the mean difference is close to
  normal even for skewed errors.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import binomtest, norm, ttest_rel

from monitor.stats import delong_components


@dataclass(frozen=True)
class McNemar:
    only_a: int          # rows only model A got right
    only_b: int          # rows only model B got right
    p_value: float       # exact, two-sided

    @property
    def difference(self) -> int:
        return self.only_b - self.only_a


def mcnemar(correct_a: np.ndarray, correct_b: np.ndarray) -> McNemar:
    """Exact McNemar test on two boolean arrays of per-row correctness (same rows, same order)."""
    a, b = np.asarray(correct_a, dtype=bool), np.asarray(correct_b, dtype=bool)
    if a.shape != b.shape:
        raise ValueError(f"paired arrays differ in length: {a.shape} vs {b.shape}")
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    n = only_a + only_b
    p = 1.0 if n == 0 else float(binomtest(min(only_a, only_b), n, 0.5).pvalue)
    return McNemar(only_a, only_b, min(1.0, p))


@dataclass(frozen=True)
class PairedAuc:
    auc_a: float
    auc_b: float
    variance: float      # of auc_b - auc_a
    p_value: float       # two-sided, normal

    @property
    def difference(self) -> float:
        return self.auc_b - self.auc_a


def paired_delong(y_true: np.ndarray, scores_a: np.ndarray, scores_b: np.ndarray) -> PairedAuc | None:
    """DeLong's test of ROC AUC(B) - AUC(A) on the same labelled rows; None unless each class has
    at least two rows (the variance is undefined below that)."""
    y = np.asarray(y_true).astype(bool, copy=False)
    if y.sum() < 2 or (~y).sum() < 2:
        return None
    auc_a, v10_a, v01_a = delong_components(y, scores_a)
    auc_b, v10_b, v01_b = delong_components(y, scores_b)
    m, n = len(v10_a), len(v01_a)
    s10, s01 = np.cov(np.vstack([v10_a, v10_b])), np.cov(np.vstack([v01_a, v01_b]))
    variance = float((s10[0, 0] + s10[1, 1] - 2 * s10[0, 1]) / m + (s01[0, 0] + s01[1, 1] - 2 * s01[0, 1]) / n)
    diff = auc_b - auc_a
    if variance <= 1e-15:  # identical rankings: no difference to test
        p = 1.0 if abs(diff) < 1e-12 else 0.0
    else:
        p = float(2 * norm.sf(abs(diff) / math.sqrt(variance)))
    return PairedAuc(float(auc_a), float(auc_b), max(variance, 0.0), p)


def paired_macro_delong(y_true: np.ndarray, proba_a: np.ndarray, proba_b: np.ndarray) -> PairedAuc | None:
    """One-vs-rest macro ROC AUC(B) - AUC(A) of two multiclass models (``proba_*``: rows x classes)
    on the same rows, classes being indices; over the classes with at least two rows in and out
    (as :func:`monitor.taskstats.macro_auc`); None when fewer than two such classes."""
    y = np.asarray(y_true)
    a, b = np.asarray(proba_a, dtype=np.float64), np.asarray(proba_b, dtype=np.float64)
    per_class = [found for k in range(a.shape[1])
                 if (found := paired_delong(y == k, a[:, k], b[:, k])) is not None]
    if len(per_class) < 2:
        return None
    k = len(per_class)
    auc_a = float(np.mean([c.auc_a for c in per_class]))
    auc_b = float(np.mean([c.auc_b for c in per_class]))
    variance = sum(c.variance for c in per_class) / k ** 2
    diff = auc_b - auc_a
    if variance <= 1e-15:
        p = 1.0 if abs(diff) < 1e-12 else 0.0
    else:
        p = float(2 * norm.sf(abs(diff) / math.sqrt(variance)))
    return PairedAuc(auc_a, auc_b, variance, p)


@dataclass(frozen=True)
class PairedErrors:
    mae_a: float
    mae_b: float
    p_value: float       # two-sided paired t test of the per-row absolute errors

    @property
    def difference(self) -> float:
        return self.mae_b - self.mae_a


def paired_errors(y_true: np.ndarray, pred_a: np.ndarray, pred_b: np.ndarray) -> PairedErrors:
    """Paired t test of MAE(B) - MAE(A) on the same rows (see the module doc for why t)."""
    y = np.asarray(y_true, dtype=np.float64)
    a, b = np.asarray(pred_a, dtype=np.float64), np.asarray(pred_b, dtype=np.float64)
    if not y.shape == a.shape == b.shape:
        raise ValueError(f"paired arrays differ in length: {y.shape}, {a.shape} and {b.shape}")
    err_a, err_b = np.abs(a - y), np.abs(b - y)
    if len(y) == 0:
        return PairedErrors(float("nan"), float("nan"), 1.0)
    mae_a, mae_b = float(err_a.mean()), float(err_b.mean())
    diff = err_b - err_a
    if len(y) < 2 or float(np.ptp(diff)) <= 1e-12 * max(1.0, float(np.abs(diff).max())):
        # No spread in the differences: nothing to test unless they are all the same non-zero shift.
        p = 1.0 if abs(mae_b - mae_a) < 1e-12 or len(y) < 2 else 0.0
    else:
        p = float(ttest_rel(err_b, err_a).pvalue)
    return PairedErrors(mae_a, mae_b, min(1.0, p))
