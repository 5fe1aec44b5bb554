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

Multiclass: :mod:`monitor.drift.multiclass_estimation` (per-class calibration, macro F1 and ROC AUC).
Regression: direct loss estimation, :mod:`monitor.drift.loss_estimation`. The calibrator and the
accuracy band live in :mod:`monitor.drift.calibration`, the weighted AUC in
:mod:`monitor.drift.expected_auc`; every name this module had before them is still importable here.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from monitor.drift.calibration import (CALIBRATION_BINS, MIN_CALIBRATION_ROWS, Calibrator, _accuracy_interval,
                                       _calibration_variance, fit_calibrator, quantile_bins)
from monitor.drift.expected_auc import (AUC_BUCKETS, EXACT_AUC_ROWS, hanley_mcneil_interval, hanley_mcneil_variance,
                                        weighted_auc)
from monitor.drift.multiclass_estimation import (CLASS_AUC_BUCKETS, MIN_CLASS_F1_ROWS, MulticlassCalibrator,
                                                 MulticlassEstimate, _right, _served_probability,
                                                 estimate_multiclass, expected_multiclass_accuracy,
                                                 fit_multiclass_calibrator)

__all__ = [
    "Estimate", "estimate", "expected_accuracy",
    # re-exported: the calibrator and the accuracy band, the weighted AUC, multiclass CBPE
    "CALIBRATION_BINS", "MIN_CALIBRATION_ROWS", "Calibrator", "fit_calibrator", "quantile_bins",
    "AUC_BUCKETS", "EXACT_AUC_ROWS", "weighted_auc", "hanley_mcneil_variance", "hanley_mcneil_interval",
    "CLASS_AUC_BUCKETS", "MIN_CLASS_F1_ROWS", "MulticlassCalibrator", "MulticlassEstimate",
    "fit_multiclass_calibrator", "estimate_multiclass", "expected_multiclass_accuracy",
    "_accuracy_interval", "_calibration_variance", "_right", "_served_probability",
]


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
