"""Performance estimated from the scores alone, before labels arrive (confidence-based
performance estimation, CBPE, as in NannyML).

The champion's scores are calibrated on its reference sample (rows it did not learn from come
first there: see ``trainer.baseline_training.reference_sample``) with scikit-learn's isotonic
regression, giving ``p_i = P(y = 1 | score_i)``. For a window's rows and their served labels:

- each row is correct with probability ``q_i = p_i`` when it was predicted 1, ``1 - p_i`` when 0,
  so the expected accuracy is ``mean(q_i)``; the realised accuracy is a sum of independent
  Bernoulli(q_i) over n, whose variance is ``sum q_i (1 - q_i) / n^2``. The calibration itself was
  learnt from a finite reference, so a second term is added: with the reference's scores cut into
  ``CALIBRATION_BINS`` quantile bins, ``sum_b (n_b / n)^2 q_b (1 - q_b) / r_b`` (``n_b`` window rows
  and ``r_b`` reference rows in bin b, ``q_b`` their mean q), which grows when a shift moves the
  window onto scores the reference saw rarely. The band is z (``drift.confidence``) times the
  square root of the sum;
- the expected confusion matrix is ``TP = sum p_i [pred 1]``, ``FP = sum (1 - p_i) [pred 1]``,
  ``FN = sum p_i [pred 0]``, ``TN = sum (1 - p_i) [pred 0]``; precision, recall and F1 follow;
- ROC AUC is the weighted Mann-Whitney statistic: every row counts as a positive with weight
  ``p_i`` and as a negative with weight ``1 - p_i``, ranked by its raw score; its band is Hanley &
  McNeil's (1982) variance at the expected class counts.

It is right when ``P(y | score)`` is what it was on the reference: under a covariate shift of a
well-calibrated model. It is *blind* to a concept shift (``P(y | x)`` changes, the scores do
not), see docs/parts/estimation.md. All numpy: a 1M-row window costs tens of milliseconds.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

MIN_CALIBRATION_ROWS = 100  # fewer labelled reference rows (or one class only): no estimation
CALIBRATION_BINS = 20       # quantile bins of the reference scores, for the calibration term of the band


@dataclass(frozen=True)
class Calibrator:
    """Isotonic map from raw score to P(y = 1), fitted on ``rows`` reference rows."""

    thresholds: np.ndarray   # increasing scores ...
    values: np.ndarray       # ... and the calibrated probability at each (linear in between, clipped outside)
    rows: int
    edges: np.ndarray        # inner edges of the reference scores' quantile bins
    counts: np.ndarray       # reference rows per bin (len(edges) + 1 bins)

    def __call__(self, scores: np.ndarray) -> np.ndarray:
        return np.interp(np.asarray(scores, dtype=np.float64), self.thresholds, self.values)

    def bins(self, scores: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.edges, scores, side="right")


def fit_calibrator(y: np.ndarray, scores: np.ndarray) -> Calibrator | None:
    """Fit on the reference's labelled rows; None with too few rows or a single class."""
    y = np.asarray(y, dtype=np.float64)
    s = np.asarray(scores, dtype=np.float64)
    if len(y) < MIN_CALIBRATION_ROWS or y.min() == y.max():
        return None
    from sklearn.isotonic import IsotonicRegression  # sklearn is heavy to import; only the checks need it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(s, y)
    edges = np.unique(np.quantile(s, np.linspace(0.0, 1.0, CALIBRATION_BINS + 1)[1:-1]))
    counts = np.bincount(np.searchsorted(edges, s, side="right"), minlength=len(edges) + 1)
    return Calibrator(np.asarray(iso.X_thresholds_, dtype=np.float64),
                      np.asarray(iso.y_thresholds_, dtype=np.float64), len(y), edges, counts)


def _calibration_variance(calibrator: Calibrator, scores: np.ndarray, q: np.ndarray) -> float:
    """Variance the finite reference adds to ``mean(q)`` (module docstring)."""
    k = len(calibrator.counts)
    b = calibrator.bins(scores)
    n_b = np.bincount(b, minlength=k).astype(np.float64)
    q_b = np.bincount(b, weights=q, minlength=k) / np.maximum(n_b, 1.0)
    share = n_b / len(scores)
    return float((share * share * q_b * (1.0 - q_b) / np.maximum(calibrator.counts, 1)).sum())


@dataclass(frozen=True)
class Estimate:
    rows: int
    accuracy: float
    accuracy_ci: tuple[float, float]
    roc_auc: float | None
    roc_auc_ci: tuple[float, float] | None
    precision: float | None
    recall: float | None
    f1: float | None


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


EXACT_AUC_ROWS = 1 << 16   # above this many rows, scores are bucketed into AUC_BUCKETS instead of sorted
AUC_BUCKETS = 1 << 20


def weighted_auc(scores: np.ndarray, p: np.ndarray) -> float | None:
    """ROC AUC with row i a positive of weight p_i and a negative of weight 1 - p_i (ties count one half).

    Sorting a million scores costs about 0.3 s; above ``EXACT_AUC_ROWS`` rows the scores go into
    2^20 equal-width buckets (one pass, ``bincount``) and rows sharing a bucket count as ties, which
    moves the AUC by at most the weight of pairs closer than range / 2^20 (negligible)."""
    pos_total, neg_total = float(p.sum()), float((1.0 - p).sum())
    if pos_total <= 0 or neg_total <= 0:
        return None
    if len(scores) > EXACT_AUC_ROWS:
        lo, hi = float(scores.min()), float(scores.max())
        span = hi - lo if hi > lo else 1.0
        idx = np.minimum(((scores - lo) * (AUC_BUCKETS / span)).astype(np.int64), AUC_BUCKETS - 1)
        g1 = np.bincount(idx, weights=p, minlength=AUC_BUCKETS)
        g0 = np.bincount(idx, minlength=AUC_BUCKETS) - g1
    else:
        order = np.argsort(scores, kind="stable")
        s, w1 = scores[order], p[order]
        starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])      # groups of tied scores, ascending
        g1 = np.add.reduceat(w1, starts)
        g0 = np.add.reduceat(1.0 - w1, starts)
    below = np.cumsum(g0) - g0                                      # negative weight strictly below each group
    return float((g1 * (below + 0.5 * g0)).sum() / (pos_total * neg_total))


def hanley_mcneil_interval(auc: float, positives: float, negatives: float, z: float) -> tuple[float, float] | None:
    if positives < 1 or negatives < 1:
        return None
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    var = (auc * (1 - auc) + (positives - 1) * (q1 - auc * auc) + (negatives - 1) * (q2 - auc * auc)) \
        / (positives * negatives)
    half = z * math.sqrt(max(var, 0.0))
    return max(0.0, auc - half), min(1.0, auc + half)


def expected_accuracy(calibrator: Calibrator, scores: np.ndarray, predicted: np.ndarray) -> float | None:
    """Only the expected accuracy (cheap): what the realised-vs-estimated error needs."""
    if not len(scores):
        return None
    p = calibrator(scores)
    return float(np.where(np.asarray(predicted).astype(bool, copy=False), p, 1.0 - p).mean())


def estimate(calibrator: Calibrator, scores: np.ndarray, predicted: np.ndarray,
             confidence: float = 0.95) -> Estimate | None:
    """Expected accuracy, ROC AUC, precision, recall and F1 of rows with these scores and served
    labels (module docstring); None for no rows."""
    s = np.asarray(scores, dtype=np.float64)
    n = len(s)
    if n == 0:
        return None
    p = calibrator(s)
    pred = np.asarray(predicted).astype(bool, copy=False)
    q = np.where(pred, p, 1.0 - p)
    z = float(norm.ppf(0.5 + confidence / 2.0))
    acc = float(q.mean())
    half = z * math.sqrt(float((q * (1.0 - q)).sum()) / (n * n) + _calibration_variance(calibrator, s, q))
    tp, fp = float(p[pred].sum()), float((1.0 - p[pred]).sum())
    fn = float(p[~pred].sum())
    auc = weighted_auc(s, p)
    return Estimate(
        rows=n, accuracy=acc, accuracy_ci=(max(0.0, acc - half), min(1.0, acc + half)),
        roc_auc=auc,
        roc_auc_ci=None if auc is None else hanley_mcneil_interval(auc, float(p.sum()), float((1 - p).sum()), z),
        precision=_ratio(tp, tp + fp), recall=_ratio(tp, tp + fn), f1=_ratio(2 * tp, 2 * tp + fp + fn),
    )
