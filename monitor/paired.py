"""Paired tests: two models scored on the same rows. Which one is better, beyond chance?

- :func:`mcnemar`: accuracy. Only the rows where exactly one model is right carry information
  (``b``: only A right, ``c``: only B right); under "equally accurate" each such row goes either
  way with probability 1/2, so the exact two-sided p-value is a binomial tail (McNemar 1947; the
  exact form needs no continuity correction and is right for small ``b + c``).
- :func:`paired_delong`: ROC AUC. DeLong, DeLong & Clarke-Pearson (1988): the two AUCs' structural
  components on the same positives and negatives are correlated, and the variance of the
  difference uses their covariance; a normal test on it. Built on the mid-rank components of
  :func:`monitor.stats.delong_auc`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import binomtest, norm

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
