"""Multiclass performance estimated from the probabilities alone, before labels arrive (NannyML's
multiclass CBPE, plus a top-label calibration for accuracy; binary CBPE and what both assume:
:mod:`monitor.drift.estimation`).

One isotonic calibrator per class (:mod:`monitor.drift.calibration`), one-vs-rest, on the
reference's probabilities (a class the reference cannot calibrate, e.g. one it never saw, keeps its
raw probability), then each row renormalised to sum to 1, giving ``P_ik``. Per class k,
``TP_k = sum P_ik [served k]``, ``FP_k = #served k - TP_k``, ``FN_k = sum P_ik - TP_k``, and macro F1
is the mean F1 over classes with ``2 TP + FP + FN >= 0.5`` (served or expected at least half a row);
macro ROC AUC is the mean of the weighted AUCs (:mod:`monitor.drift.expected_auc`) of each class's
raw probability against its ``P_ik``, with Hanley & McNeil variances combined as
:func:`monitor.taskstats.macro_auc` combines DeLong's. Accuracy is ``mean(q_i)`` with the binary
band, where ``q_i`` = P(the served class is right | its probability), one more isotonic calibrator
fitted on the reference's served-class probabilities against "was right" (the band's bins are
that calibrator's). Renormalising undoes much of what the per-class calibrators correct for the
served class: an over-confident softmax MLP whose served probability averaged 1.2 points above
its accuracy kept 1.5 points of optimism through ``P_i,served``, 1.0 through ``q_i`` (the rest was
its reference's own luck), docs/parts/estimation.md. Without that calibrator (a reference always
or never right) ``q_i = P_i,served``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from monitor.drift.calibration import (MIN_CALIBRATION_ROWS, Calibrator, _accuracy_interval, fit_calibrator,
                                       quantile_bins)
from monitor.drift.expected_auc import hanley_mcneil_variance, weighted_auc

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
