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

Multiclass (NannyML's multiclass CBPE, plus a top-label calibration for accuracy): one isotonic
calibrator per class, one-vs-rest, on the reference's probabilities (a class the reference cannot
calibrate, e.g. one it never saw, keeps its raw probability), then each row renormalised to sum to
1, giving ``P_ik``. Per class k, ``TP_k = sum P_ik [served k]``, ``FP_k = #served k - TP_k``,
``FN_k = sum P_ik - TP_k``, and macro F1 is the mean F1 over classes with ``2 TP + FP + FN >= 0.5``
(served or expected at least half a row); macro ROC AUC is the mean of the weighted AUCs of each
class's raw probability against its ``P_ik``, with Hanley & McNeil variances combined as
:func:`monitor.taskstats.macro_auc` combines DeLong's. Accuracy is ``mean(q_i)`` with the binary
band, where ``q_i`` = P(the served class is right | its probability), one more isotonic calibrator
fitted on the reference's served-class probabilities against "was right" (the band's bins are
that calibrator's). Renormalising undoes much of what the per-class calibrators correct for the
served class: an over-confident softmax MLP whose served probability averaged 1.2 points above
its accuracy kept 1.5 points of optimism through ``P_i,served``, 1.0 through ``q_i`` (the rest was
its reference's own luck), docs/parts/estimation.md. Without that calibrator (a reference always
or never right) ``q_i = P_i,served``.

Regression: direct loss estimation, :mod:`monitor.drift.loss_estimation`.
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
    return Calibrator(np.asarray(iso.X_thresholds_, dtype=np.float64),
                      np.asarray(iso.y_thresholds_, dtype=np.float64), len(y), *quantile_bins(s))


def quantile_bins(values: np.ndarray, bins: int = CALIBRATION_BINS) -> tuple[np.ndarray, np.ndarray]:
    """Inner edges of ``bins`` quantile bins of ``values`` (ties merged) and the rows in each bin."""
    edges = np.unique(np.quantile(values, np.linspace(0.0, 1.0, bins + 1)[1:-1]))
    return edges, np.bincount(np.searchsorted(edges, values, side="right"), minlength=len(edges) + 1)


def _calibration_variance(calibrator: Calibrator | MulticlassCalibrator, scores: np.ndarray, q: np.ndarray) -> float:
    """Variance the finite reference adds to ``mean(q)`` (module docstring)."""
    k = len(calibrator.counts)
    b = calibrator.bins(scores)
    n_b = np.bincount(b, minlength=k).astype(np.float64)
    q_b = np.bincount(b, weights=q, minlength=k) / np.maximum(n_b, 1.0)
    share = n_b / len(scores)
    return float((share * share * q_b * (1.0 - q_b) / np.maximum(calibrator.counts, 1)).sum())


def _accuracy_interval(calibrator: Calibrator | MulticlassCalibrator, scores: np.ndarray, q: np.ndarray,
                       z: float) -> tuple[float, float]:
    """``mean(q)`` plus or minus z times the root of its Bernoulli and calibration variances."""
    n = len(q)
    acc = float(q.mean())
    half = z * math.sqrt(float((q * (1.0 - q)).sum()) / (n * n) + _calibration_variance(calibrator, scores, q))
    return max(0.0, acc - half), min(1.0, acc + half)


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


def weighted_auc(scores: np.ndarray, p: np.ndarray, buckets: int = AUC_BUCKETS,
                 exact_rows: int = EXACT_AUC_ROWS) -> float | None:
    """ROC AUC with row i a positive of weight p_i and a negative of weight 1 - p_i (ties count one half).

    Sorting a million scores costs about 0.3 s; above ``EXACT_AUC_ROWS`` rows the scores go into
    2^20 equal-width buckets (one pass, ``bincount``) and rows sharing a bucket count as ties, which
    moves the AUC by at most the weight of pairs closer than range / 2^20 (negligible)."""
    pos_total, neg_total = float(p.sum()), float((1.0 - p).sum())
    if pos_total <= 0 or neg_total <= 0:
        return None
    if len(scores) > exact_rows:
        lo, hi = float(scores.min()), float(scores.max())
        span = hi - lo if hi > lo else 1.0
        idx = np.minimum(((scores - lo) * (buckets / span)).astype(np.int64), buckets - 1)
        g1 = np.bincount(idx, weights=p, minlength=buckets)
        g0 = np.bincount(idx, minlength=buckets) - g1
    else:
        order = np.argsort(scores, kind="stable")
        s, w1 = scores[order], p[order]
        starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])      # groups of tied scores, ascending
        g1 = np.add.reduceat(w1, starts)
        g0 = np.add.reduceat(1.0 - w1, starts)
    below = np.cumsum(g0) - g0                                      # negative weight strictly below each group
    return float((g1 * (below + 0.5 * g0)).sum() / (pos_total * neg_total))


def hanley_mcneil_variance(auc: float, positives: float, negatives: float) -> float | None:
    if positives < 1 or negatives < 1:
        return None
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    var = (auc * (1 - auc) + (positives - 1) * (q1 - auc * auc) + (negatives - 1) * (q2 - auc * auc)) \
        / (positives * negatives)
    return max(var, 0.0)


def hanley_mcneil_interval(auc: float, positives: float, negatives: float, z: float) -> tuple[float, float] | None:
    var = hanley_mcneil_variance(auc, positives, negatives)
    if var is None:
        return None
    half = z * math.sqrt(var)
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
    tp, fp = float(p[pred].sum()), float((1.0 - p[pred]).sum())
    fn = float(p[~pred].sum())
    auc = weighted_auc(s, p)
    return Estimate(
        rows=n, accuracy=acc, accuracy_ci=_accuracy_interval(calibrator, s, q, z),
        roc_auc=auc,
        roc_auc_ci=None if auc is None else hanley_mcneil_interval(auc, float(p.sum()), float((1 - p).sum()), z),
        precision=_ratio(tp, tp + fp), recall=_ratio(tp, tp + fn), f1=_ratio(2 * tp, 2 * tp + fp + fn),
    )


# --- multiclass ---------------------------------------------------------------------------------

MIN_CLASS_F1_ROWS = 0.5   # a class enters the estimated macro F1 when served or expected at least this often
# One weighted AUC per class: above this many rows, probabilities go into this many buckets (rows in
# one bucket, closer than 1/16384 of the range, count as ties: a few 1e-5 of AUC) instead of 2^20,
# whose passes over a million-long array cost ~50 ms per class whatever the window.
CLASS_AUC_BUCKETS = 1 << 14


@dataclass(frozen=True)
class MulticlassCalibrator:
    """One-vs-rest isotonic calibrators (None: the class keeps its raw probability), the served
    class's probability -> P(right) calibrator, and the quantile bins of the reference's served-class
    probability for the calibration term of the band."""

    classes: tuple[Calibrator | None, ...]
    served: Calibrator | None
    rows: int
    edges: np.ndarray
    counts: np.ndarray

    def __call__(self, proba: np.ndarray) -> np.ndarray:
        """Calibrated probabilities (rows x classes), each row summing to 1."""
        raw = np.asarray(proba, dtype=np.float64)
        cal = np.column_stack([raw[:, k] if c is None else c(raw[:, k]) for k, c in enumerate(self.classes)])
        total = cal.sum(axis=1, keepdims=True)
        raw_total = raw.sum(axis=1, keepdims=True)
        # A row every calibrator puts at 0 keeps its raw probabilities (normalised).
        return np.where(total > 0, cal / np.where(total > 0, total, 1.0), raw / np.where(raw_total > 0, raw_total, 1.0))

    def bins(self, scores: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.edges, scores, side="right")


def fit_multiclass_calibrator(y: np.ndarray, proba: np.ndarray, predicted: np.ndarray,
                              served_score: np.ndarray) -> MulticlassCalibrator | None:
    """Fit on the reference's labelled rows (class indices, raw probabilities, the served class and
    its probability); None with fewer than ``MIN_CALIBRATION_ROWS`` rows or a single class."""
    y = np.asarray(y, dtype=np.int64)
    proba = np.asarray(proba, dtype=np.float64)
    if len(y) < MIN_CALIBRATION_ROWS or proba.ndim != 2 or len(np.unique(y)) < 2:
        return None
    classes = tuple(fit_calibrator((y == k).astype(np.float64), proba[:, k]) for k in range(proba.shape[1]))
    served = np.asarray(served_score, dtype=np.float64)
    right = (np.asarray(predicted, dtype=np.int64) == y).astype(np.float64)
    return MulticlassCalibrator(classes, fit_calibrator(right, served), len(y), *quantile_bins(served))


@dataclass(frozen=True)
class MulticlassEstimate:
    rows: int
    accuracy: float
    accuracy_ci: tuple[float, float]
    macro_f1: float | None
    roc_auc: float | None                # one-vs-rest macro
    roc_auc_ci: tuple[float, float] | None


def _served_probability(calibrated: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    pred = np.asarray(predicted, dtype=np.int64)
    inside = (pred >= 0) & (pred < calibrated.shape[1])   # a served class outside the list is never right
    return np.where(inside, calibrated[np.arange(len(pred)), np.clip(pred, 0, calibrated.shape[1] - 1)], 0.0)


def _right(calibrator: MulticlassCalibrator, calibrated: np.ndarray, predicted: np.ndarray,
           served_score: np.ndarray) -> np.ndarray:
    """P(the served class is right) per row (module docstring)."""
    if calibrator.served is None:
        return _served_probability(calibrated, predicted)
    pred = np.asarray(predicted, dtype=np.int64)
    inside = (pred >= 0) & (pred < calibrated.shape[1])
    return np.where(inside, calibrator.served(served_score), 0.0)


def expected_multiclass_accuracy(calibrator: MulticlassCalibrator, proba: np.ndarray, predicted: np.ndarray,
                                 served_score: np.ndarray) -> float | None:
    """Only the expected accuracy (cheap): what the realised-vs-estimated error needs."""
    if not len(predicted):
        return None
    calibrated = calibrator(proba) if calibrator.served is None else np.empty((0, proba.shape[1]))
    return float(_right(calibrator, calibrated, predicted, np.asarray(served_score, dtype=np.float64)).mean())


def _macro_f1(calibrated: np.ndarray, pred: np.ndarray, q: np.ndarray) -> float | None:
    k = calibrated.shape[1]
    inside = (pred >= 0) & (pred < k)
    tp = np.bincount(pred[inside], weights=q[inside], minlength=k)[:k]
    served = np.bincount(pred[inside], minlength=k)[:k].astype(np.float64)
    actual = calibrated.sum(axis=0)
    denominators = served + actual                  # 2 TP + FP + FN
    present = denominators >= MIN_CLASS_F1_ROWS
    return float((2 * tp[present] / denominators[present]).mean()) if present.any() else None


def _macro_auc(proba: np.ndarray, calibrated: np.ndarray, z: float) -> tuple[float | None, tuple[float, float] | None]:
    aucs, variances = [], []
    for k in range(proba.shape[1]):
        auc = weighted_auc(proba[:, k], calibrated[:, k], CLASS_AUC_BUCKETS, CLASS_AUC_BUCKETS)
        if auc is None:
            continue
        positives = float(calibrated[:, k].sum())
        aucs.append(auc)
        variances.append(hanley_mcneil_variance(auc, positives, len(proba) - positives))
    if len(aucs) < 2:
        return None, None
    auc = float(np.mean(aucs))
    if any(v is None for v in variances):
        return auc, None
    half = z * math.sqrt(sum(v for v in variances if v is not None)) / len(aucs)
    return auc, (max(0.0, auc - half), min(1.0, auc + half))


def estimate_multiclass(calibrator: MulticlassCalibrator, proba: np.ndarray, predicted: np.ndarray,
                        served_score: np.ndarray, confidence: float = 0.95) -> MulticlassEstimate | None:
    """Expected accuracy (with its band), macro F1 and one-vs-rest macro ROC AUC (with its band) of
    rows with these raw probabilities, served classes and served-class probabilities (module
    docstring); None for no rows."""
    raw = np.asarray(proba, dtype=np.float64)
    n = len(raw)
    if n == 0:
        return None
    calibrated = calibrator(raw)
    pred = np.asarray(predicted, dtype=np.int64)
    served = np.asarray(served_score, dtype=np.float64)
    q = _right(calibrator, calibrated, pred, served)
    z = float(norm.ppf(0.5 + confidence / 2.0))
    auc, auc_ci = _macro_auc(raw, calibrated, z)
    return MulticlassEstimate(
        rows=n, accuracy=float(q.mean()), accuracy_ci=_accuracy_interval(calibrator, served, q, z),
        macro_f1=_macro_f1(calibrated, pred, _served_probability(calibrated, pred)), roc_auc=auc, roc_auc_ci=auc_ci)
