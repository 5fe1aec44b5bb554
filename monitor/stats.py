"""Classification metrics, one module for every part (bottom layer): the trainer's accuracy, ROC AUC
and log loss, and the monitor's performance statistics with confidence intervals, built on numpy
and scipy (cheap on millions of rows).

- :func:`binary_metrics` (accuracy, ROC AUC, log loss) for training, evaluation and the promotion gate;
- accuracy with the Wilson score interval, from scipy (good coverage also near 0/1 and for
  small n, unlike the Wald interval);
- ROC AUC with DeLong's variance (DeLong, DeLong & Clarke-Pearson 1988), computed in
  O(n log n) from mid-ranks (Sun & Xu 2014), normal interval clipped to [0, 1] as pROC does;
- :func:`labels_needed`: how many labelled rows a one-sided test needs to see an accuracy drop,
  the reasoning behind the ``drift.min_labels`` default.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

# scipy.stats is imported where it is used: it costs about a second to import, and the training
# loop (``import trainer.loop``, the retrain child, the GPU benchmark) should not pay that up front.


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


@functools.lru_cache(maxsize=16)  # scipy's ppf costs ~0.2 ms; the segments ask hundreds of times a check
def _z(confidence: float) -> float:
    _check_confidence(confidence)
    from scipy.stats import norm
    return float(norm.ppf(0.5 + confidence / 2.0))


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """Wilson score interval for a binomial proportion (scipy's ``binomtest(...).proportion_ci``);
    None when ``n == 0``.

    Two-sided at ``confidence``. A one-sided bound at level ``c`` is one end of the two-sided
    interval at ``2c - 1`` (each tail then holds ``1 - c``); the change-point fast lane and the
    promotion gate ask for it that way.

    Cost, measured: 0.1-0.5 ms a call (``binomtest`` also computes a p-value) against 0.03 ms for
    the closed form this replaced; a check calls it once per segment value (tens of calls), a few
    milliseconds in a check that takes hundreds.
    """
    if n <= 0:
        return None
    _check_confidence(confidence)
    from scipy.stats import binomtest
    ci = binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


@dataclass(frozen=True)
class AucEstimate:
    auc: float
    variance: float | None   # DeLong; None with fewer than two rows in a class

    def interval(self, confidence: float = 0.95) -> tuple[float, float] | None:
        if self.variance is None:
            return None
        half = _z(confidence) * math.sqrt(max(self.variance, 0.0))
        return max(0.0, self.auc - half), min(1.0, self.auc + half)


def delong_components(y_true: np.ndarray, scores: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """``(auc, v10, v01)``: ROC AUC (ties count one half) and its structural components: for each
    positive, the share of negatives it outranks (``v10``), and for each negative, the share of
    positives that outrank it (``v01``). Both classes must occur. monitor.paired pairs them."""
    y = np.asarray(y_true).astype(bool, copy=False)
    s = np.asarray(scores, dtype=np.float64)
    pos, neg = s[y], s[~y]
    m, n = len(pos), len(neg)
    from scipy.stats import rankdata
    ranks_all = rankdata(np.concatenate([pos, neg]))          # mid-ranks over both classes
    ranks_pos_all, ranks_neg_all = ranks_all[:m], ranks_all[m:]
    auc = (ranks_pos_all.sum() - m * (m + 1) / 2.0) / (m * n)
    v10 = (ranks_pos_all - rankdata(pos)) / n
    v01 = 1.0 - (ranks_neg_all - rankdata(neg)) / m
    return float(auc), v10, v01


def delong_auc(y_true: np.ndarray, scores: np.ndarray) -> AucEstimate | None:
    """ROC AUC (ties count one half) and its DeLong variance; None unless both classes occur."""
    y = np.asarray(y_true).astype(bool, copy=False)
    m, n = int(y.sum()), int((~y).sum())
    if m == 0 or n == 0:
        return None
    auc, v10, v01 = delong_components(y, scores)
    if m < 2 or n < 2:
        return AucEstimate(auc, None)
    variance = v10.var(ddof=1) / m + v01.var(ddof=1) / n
    return AucEstimate(auc, float(variance))


@dataclass(frozen=True)
class Performance:
    rows: int
    accuracy: float | None
    accuracy_ci: tuple[float, float] | None
    roc_auc: float | None
    roc_auc_ci: tuple[float, float] | None
    positive_rate: float | None
    precision: float | None = None   # at the served labels (model.threshold); None when undefined (0/0)
    recall: float | None = None
    f1: float | None = None
    # multiclass (monitor.taskstats): F1 averaged over classes, and each class's precision / recall
    # by class index (absent where undefined: the class was never served / never the label).
    macro_f1: float | None = None
    weighted_f1: float | None = None
    class_precision: dict[int, float] | None = None
    class_recall: dict[int, float] | None = None
    class_rows: dict[int, int] | None = None   # labelled rows per true class
    # regression (monitor.taskstats): errors of the predicted value, with intervals.
    mae: float | None = None
    mae_ci: tuple[float, float] | None = None
    rmse: float | None = None
    rmse_ci: tuple[float, float] | None = None
    mape: float | None = None                  # None when a target is 0
    r2: float | None = None
    r2_ci: tuple[float, float] | None = None
    bias: float | None = None                  # the mean signed residual (prediction - target)
    residual_sd: float | None = None           # the residuals' standard deviation (ddof 1)


def performance(y_true: np.ndarray, y_pred: np.ndarray, scores: np.ndarray,
                confidence: float = 0.95) -> Performance:
    """Accuracy of the served labels and ROC AUC of the scores, each with an interval; precision,
    recall and F1 of the served labels.

    AUC is None when the labels hold a single class (it is undefined, not 0.5)."""
    y = np.asarray(y_true, dtype=np.int64)
    n = len(y)
    if n == 0:
        return Performance(0, None, None, None, None, None)
    pred = np.asarray(y_pred, dtype=np.int64)
    correct = int((y == pred).sum())
    tp = int(((pred == 1) & (y == 1)).sum())
    predicted, actual = int(pred.sum()), int(y.sum())
    est = delong_auc(y, scores)
    return Performance(
        rows=n,
        accuracy=correct / n,
        accuracy_ci=wilson_interval(correct, n, confidence),
        roc_auc=None if est is None else est.auc,
        roc_auc_ci=None if est is None else est.interval(confidence),
        positive_rate=float(y.mean()),
        precision=tp / predicted if predicted else None,
        recall=tp / actual if actual else None,
        f1=2 * tp / (predicted + actual) if predicted + actual else None,
    )


def labels_needed(accuracy: float, drop: float, alpha: float = 0.05, power: float = 0.8,
                  one_sided: bool = True) -> int:
    """Rows needed for a one-sample test of ``accuracy`` against ``accuracy - drop`` (normal
    approximation): ``n = (z_a sqrt(p0 q0) + z_b sqrt(p1 q1))^2 / drop^2``."""
    if not 0.0 < drop < accuracy < 1.0:
        raise ValueError("need 0 < drop < accuracy < 1")
    p0, p1 = accuracy, accuracy - drop
    from scipy.stats import norm
    z_a = norm.ppf(1 - alpha) if one_sided else norm.ppf(1 - alpha / 2)
    z_b = norm.ppf(power)
    n = (z_a * math.sqrt(p0 * (1 - p0)) + z_b * math.sqrt(p1 * (1 - p1))) ** 2 / drop ** 2
    return int(math.ceil(n))


def accuracy(y_true: np.ndarray, proba: np.ndarray, threshold: float = 0.5) -> float:
    """Share of rows whose ``proba > threshold`` matches the label; NaN on no rows."""
    y_true = np.asarray(y_true)
    return float(np.mean((np.asarray(proba) > threshold) == (y_true == 1))) if len(y_true) else float("nan")


def roc_auc(y_true: np.ndarray, proba: np.ndarray) -> float:
    """Area under the ROC curve, ties counting one half (:func:`delong_auc`'s mid-rank identity).
    NaN when only one class is present (the AUC is undefined, not 0.5)."""
    est = delong_auc(np.asarray(y_true) == 1, proba)
    return float("nan") if est is None else est.auc


def log_loss(y_true: np.ndarray, proba: np.ndarray, eps: float = 1e-7) -> float:
    p = np.clip(np.asarray(proba, dtype=np.float64), eps, 1 - eps)
    y = np.asarray(y_true, dtype=np.float64)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))) if len(y) else float("nan")


def binary_metrics(y_true: np.ndarray, proba: np.ndarray, threshold: float = 0.5) -> dict[str, float]:
    return {"accuracy": accuracy(y_true, proba, threshold), "roc_auc": roc_auc(y_true, proba),
            "log_loss": log_loss(y_true, proba)}
