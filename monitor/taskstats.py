"""Performance of multiclass and regression models, with intervals (bottom layer, beside
:mod:`monitor.stats`, which holds the binary figures and the interval maths both use).

Multiclass:

- accuracy with the Wilson interval (as binary: one Bernoulli per row);
- one-vs-rest macro ROC AUC: the mean of each class's ROC AUC of its probability against the rest
  (classes without both a positive and a negative row are left out, as scikit-learn's
  ``roc_auc_score(multi_class="ovr", average="macro")`` requires them all), with the interval of
  the mean taken from each class's DeLong variance as if the classes were independent (they
  share rows, so it is approximate; it is an alerting band, not a publication figure);
- macro and weighted F1, each class's precision and recall (the served class against the label).

Regression: MAE with a t interval on the absolute errors; RMSE with the delta-method interval of
the square root of the mean squared error; MAPE when the targets are of one sign, none 0; R² with the delta-method
interval of 1 - MSE / Var(y) (the two means' covariance from the rows); the mean signed residual
(bias) and the residuals' spread, whose shift from the reference's is :func:`residual_shift`.

Which of these a model gets, and its per-row loss, is its task's to say (:meth:`monitor.tasks.Task.performance`,
:meth:`monitor.tasks.Task.per_row_loss`, which call down here): this module does not know the tasks.
"""
from __future__ import annotations

import math

import numpy as np

from monitor.stats import Performance, _z, delong_auc, wilson_interval


def macro_auc(y: np.ndarray, proba: np.ndarray, confidence: float = 0.95) -> tuple[float | None,
                                                                                   tuple[float, float] | None]:
    """One-vs-rest macro ROC AUC over the classes that have both positives and negatives, and its band.

    A class with a single positive (or negative) row has no DeLong variance; its share of the band
    is the largest variance an AUC on that many rows can have, 1 / (4 min(positives, negatives)):
    wider, never undefined (a rare class in a held-out set left every challenger's band undefined,
    and the gate refused a model that had recovered from 0.47 to 0.92)."""
    aucs: list[float] = []
    variances: list[float] = []
    for k in range(proba.shape[1]):
        positive = y == k
        est = delong_auc(positive, proba[:, k])
        if est is None:
            continue
        aucs.append(est.auc)
        fewest = min(int(positive.sum()), len(y) - int(positive.sum()))
        variances.append(est.variance if est.variance is not None else 0.25 / max(fewest, 1))
    if len(aucs) < 2:   # one class present: undefined, as for binary
        return None, None
    auc = float(np.mean(aucs))
    half = _z(confidence) * math.sqrt(max(sum(variances), 0.0)) / len(aucs)
    return auc, (max(0.0, auc - half), min(1.0, auc + half))


def multiclass_performance(y_true: np.ndarray, y_pred: np.ndarray, proba: np.ndarray | None,
                           n_classes: int, confidence: float = 0.95) -> Performance:
    y = np.asarray(y_true, dtype=np.int64)
    n = len(y)
    if n == 0:
        return Performance(0, None, None, None, None, None)
    pred = np.asarray(y_pred, dtype=np.int64)
    correct = int((y == pred).sum())
    auc, auc_ci = (None, None) if proba is None else macro_auc(y, np.asarray(proba, dtype=np.float64), confidence)
    tp = np.bincount(y[y == pred], minlength=n_classes)[:n_classes]
    actual = np.bincount(y, minlength=n_classes)[:n_classes]
    served = np.bincount(pred[(pred >= 0) & (pred < n_classes)], minlength=n_classes)[:n_classes]
    precision = {k: float(tp[k] / served[k]) for k in range(n_classes) if served[k]}
    recall = {k: float(tp[k] / actual[k]) for k in range(n_classes) if actual[k]}
    denominators = served + actual
    f1 = np.where(denominators > 0, 2 * tp / np.maximum(denominators, 1), 0.0)
    present = denominators > 0           # scikit-learn's macro F1 over the labels that occur
    macro_f1 = float(f1[present].mean()) if present.any() else None
    weighted_f1 = float((f1 * actual).sum() / n)
    return Performance(
        rows=n, accuracy=correct / n, accuracy_ci=wilson_interval(correct, n, confidence),
        roc_auc=auc, roc_auc_ci=auc_ci, positive_rate=None,
        macro_f1=macro_f1, weighted_f1=weighted_f1, class_precision=precision, class_recall=recall,
        class_rows={k: int(actual[k]) for k in range(n_classes)},
    )


def regression_performance(y_true: np.ndarray, y_pred: np.ndarray, confidence: float = 0.95) -> Performance:
    y = np.asarray(y_true, dtype=np.float64)
    n = len(y)
    if n == 0:
        return Performance(0, None, None, None, None, None)
    err = np.asarray(y_pred, dtype=np.float64) - y
    abs_err, sq_err = np.abs(err), err * err
    mae, mse = float(abs_err.mean()), float(sq_err.mean())
    rmse = math.sqrt(mse)
    mae_ci = rmse_ci = r2_ci = None
    r2 = None
    z = _z(confidence)
    if n >= 2:
        from scipy.stats import t
        half = float(t.ppf(0.5 + confidence / 2, n - 1)) * float(abs_err.std(ddof=1)) / math.sqrt(n)
        mae_ci = (max(0.0, mae - half), mae + half)
        se_mse = float(sq_err.std(ddof=1)) / math.sqrt(n)
        se_rmse = se_mse / (2 * rmse) if rmse > 0 else 0.0     # delta method for sqrt
        rmse_ci = (max(0.0, rmse - z * se_rmse), rmse + z * se_rmse)
        dev = (y - y.mean()) ** 2
        var_y = float(dev.mean())
        if var_y > 0:
            r2 = 1.0 - mse / var_y
            # Delta method for 1 - a/b with a = mean(sq_err), b = mean(dev) (rows give their covariance).
            cov = np.cov(np.vstack([sq_err, dev]), ddof=1) / n
            grad = np.array([-1.0 / var_y, mse / var_y ** 2])
            se_r2 = math.sqrt(max(float(grad @ cov @ grad), 0.0))
            r2_ci = (r2 - z * se_r2, min(1.0, r2 + z * se_r2))
    mape = float((abs_err / np.abs(y)).mean()) if mape_defined(y) else None
    return Performance(rows=n, accuracy=None, accuracy_ci=None, roc_auc=None, roc_auc_ci=None, positive_rate=None,
                       mae=mae, mae_ci=mae_ci, rmse=rmse, rmse_ci=rmse_ci, mape=mape, r2=r2, r2_ci=r2_ci,
                       bias=float(err.mean()), residual_sd=float(err.std(ddof=1)) if n >= 2 else None)


def mape_defined(y: np.ndarray) -> bool:
    """Is a percentage error of ``y`` meaningful: every target of one sign, none 0? A target that
    crosses 0 (a temperature, a profit) has values as near 0 as the sample happens to hold, and each
    divides the MAPE: it swings by multiples from window to window on an unchanged model (a healthy
    regressor's rise of 0.49 to 0.88 opened an incident). Then the MAPE is absent, as at a target of 0."""
    y = np.asarray(y, dtype="float64")
    y = y[~np.isnan(y)]
    return bool(y.size) and (bool(np.all(y > 0)) or bool(np.all(y < 0)))


def residual_shift(bias: float | None, reference_bias: float | None, reference_sd: float | None) -> float | None:
    """How far a window's mean signed residual (:attr:`Performance.bias`) moved from the reference's,
    either way, in the reference's residual standard deviations: ``|bias - reference_bias| / sd``.
    A model that starts to over- or under-predict shows here while its MAE may even fall (NannyML
    alerts such a shift two-sided). None when a figure is missing or the reference's spread is 0."""
    if bias is None or reference_bias is None or reference_sd is None:
        return None
    if not (math.isfinite(bias) and math.isfinite(reference_bias) and math.isfinite(reference_sd)) or reference_sd <= 0:
        return None
    return abs(bias - reference_bias) / reference_sd

