"""Store-shaped windows and reference samples of a multiclass and a regression model (monitor.tasks),
scored by fixed models, with the drifts the task tests need.

Multiclass: five classes, each a Gaussian blob in four numeric features, scored by the Bayes
posterior under uniform priors (a well-calibrated model while the priors are uniform). A *concept*
change relabels every row by a permutation of the classes (the features, the served classes and
the label distribution stay as they were); a *prior* shift draws the classes 45/25/15/10/5 %.

Regression: y = 50 + x . COEF + a region effect + Gaussian noise, predicted by the noise-free
function, so the MAE is the noise's mean absolute value, ``noise * sqrt(2 / pi)``.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from monitor.config import ModelConfig
from monitor.tasks import internal_proba_columns

CLASSES = ["bike", "bus", "car", "train", "walk"]
K = len(CLASSES)
NUMERIC = ["x0", "x1", "x2", "x3"]
FEATURES = [{"name": n} for n in NUMERIC] + [{"name": "region", "type": "categorical"}]
REGIONS = np.array(["eu", "us", "apac"], dtype=object)
MEANS = np.random.default_rng(7).normal(0.0, 1.3, size=(K, len(NUMERIC)))
PERMUTATION = np.array([2, 3, 4, 0, 1])        # a concept change: class k is now called PERMUTATION[k]
PRIORS_SHIFTED = np.array([0.45, 0.25, 0.15, 0.10, 0.05])
COEF = np.array([3.0, -2.0, 1.5, 0.5])
REGION_EFFECT = {"eu": 2.0, "us": -1.0, "apac": 4.0}


def multiclass_model(**update) -> ModelConfig:
    return ModelConfig(**{"name": "mc", "task": "multiclass", "classes": CLASSES, "features": FEATURES, **update})


def regression_model(**update) -> ModelConfig:
    return ModelConfig(**{"name": "rg", "task": "regression", "features": FEATURES, **update})


def expected_mae(noise: float) -> float:
    return noise * math.sqrt(2.0 / math.pi)


def _features(rng: np.random.Generator, x: np.ndarray) -> pd.DataFrame:
    frame = pd.DataFrame(x, columns=NUMERIC)
    frame["region"] = REGIONS[rng.choice(3, size=len(frame), p=[0.5, 0.3, 0.2])]
    return frame


def _hide(label: pd.Series, labelled: float, rng: np.random.Generator) -> pd.Series:
    return label.mask(rng.uniform(size=len(label)) >= labelled)


def multiclass_frame(n: int, seed: int, *, priors: np.ndarray | None = None, concept: bool = False,
                     labelled: float = 1.0, window: bool = True) -> pd.DataFrame:
    """A window (``prediction`` and Int64 ``label`` with NA where unlabelled) or, with
    ``window=False``, a reference sample as the trainer saves it (int label, no prediction)."""
    rng = np.random.default_rng(seed)
    y = rng.choice(K, size=n, p=np.full(K, 1.0 / K) if priors is None else priors)
    x = MEANS[y] + rng.standard_normal((n, len(NUMERIC)))
    logits = x @ MEANS.T - 0.5 * (MEANS ** 2).sum(axis=1)
    proba = np.exp(logits - logits.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    frame = _features(rng, x)
    served = proba.argmax(axis=1)
    frame["score"] = proba[np.arange(n), served]
    for column, values in zip(internal_proba_columns(K), proba.T):
        frame[column] = values
    truth = PERMUTATION[y] if concept else y
    if not window:
        frame["label"] = truth
        return frame
    frame["prediction"] = pd.array(served, dtype="Int64")
    frame["label"] = _hide(pd.Series(pd.array(truth, dtype="Int64")), labelled, rng)
    return frame


def regression_frame(n: int, seed: int, *, noise: float = 2.0, labelled: float = 1.0,
                     window: bool = True) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, len(NUMERIC)))
    frame = _features(rng, x)
    mean = 50.0 + x @ COEF + frame["region"].map(REGION_EFFECT).to_numpy(dtype=float)
    frame["score"] = mean
    y = mean + rng.normal(0.0, noise, size=n)
    if not window:
        frame["label"] = y
        return frame
    frame["prediction"] = mean
    frame["label"] = _hide(pd.Series(y, dtype="float64"), labelled, rng)
    return frame


def filled_result(task: str):
    """A CheckResult of ``task`` (binary, multiclass or regression) with every figure its task has
    set (no Evidently run): what the collector serves at most for that task."""
    from monitor.drift.result import CheckResult, FeatureDrift, MultivariateDrift
    from monitor.drift.segments import SegmentPerformance

    drift = FeatureDrift("score", "wasserstein", 0.05, 0.1, False)
    ci = (0.4, 0.6)
    common = dict(check_id="c0ffee", model="demo", checked_at=1.0, window_rows=100, labelled_rows=80,
                  features=[FeatureDrift("x0", "wasserstein", 0.2, 0.1, True)], drift_share=1.0,
                  drift_share_threshold=0.5, dataset_drift=True, prediction_drift=drift, performance_actionable=True,
                  missing_ratio={"x0": 0.0}, reference_missing_ratio={"x0": 0.0}, task=task,
                  label_drift=FeatureDrift("label", "jensenshannon", 0.3, 0.1, True), estimated_rows=100,
                  multivariate=MultivariateDrift(1.3, 1.0, 1.2, True, features=2, components=1, rows=100))
    segment = dict(segment="region", value="eu", rows=50, labelled_rows=40, accuracy=None, accuracy_ci=None,
                   recall=None, roc_auc=None, reference_accuracy=None, judged=True, drift_share=0.0, drift_rows=50)
    if task == "binary":
        del common["label_drift"]          # a binary check tests no label drift
        return CheckResult(**common, accuracy=0.5, accuracy_ci=ci, roc_auc=0.7, roc_auc_ci=ci, baseline_accuracy=0.6,
                           baseline_roc_auc=0.8, precision=0.5, recall=0.5, f1=0.5, predicted_positive_rate=0.5,
                           estimated_accuracy=0.5, estimated_accuracy_ci=ci, estimated_roc_auc=0.7,
                           estimated_roc_auc_ci=ci, estimated_precision=0.5, estimated_recall=0.5, estimated_f1=0.5,
                           estimation_error=0.0,
                           segments=[SegmentPerformance(**{**segment, "accuracy": 0.5, "accuracy_ci": ci,
                                                           "recall": 0.5, "roc_auc": 0.7},
                                                        estimated_accuracy=0.5, estimated_accuracy_ci=ci)])
    if task == "multiclass":
        return CheckResult(**common, classes=CLASSES, accuracy=0.5, accuracy_ci=ci, roc_auc=0.7, roc_auc_ci=ci,
                           baseline_accuracy=0.6, baseline_roc_auc=0.8, macro_f1=0.5, weighted_f1=0.5,
                           class_precision={c: 0.5 for c in CLASSES}, class_recall={c: 0.5 for c in CLASSES},
                           class_rows={c: 16 for c in CLASSES}, estimated_accuracy=0.5, estimated_accuracy_ci=ci,
                           estimated_roc_auc=0.7, estimated_roc_auc_ci=ci, estimated_macro_f1=0.5,
                           estimation_error=0.0,
                           output_drift=[FeatureDrift("prediction", "jensenshannon", 0.01, 0.1, False),
                                         FeatureDrift("proba_bike", "wasserstein", 0.01, 0.1, False)],
                           segments=[SegmentPerformance(**{**segment, "accuracy": 0.5, "accuracy_ci": ci})])
    return CheckResult(**common, mae=1.0, mae_ci=(0.9, 1.1), rmse=1.2, rmse_ci=(1.1, 1.3), mape=0.1, r2=0.8,
                       r2_ci=(0.7, 0.9), bias=0.1, residual_shift=0.05,
                       baseline_mae=1.0, estimated_mae=1.0, estimated_mae_ci=(0.9, 1.1),
                       estimated_rmse=1.2, estimated_rmse_ci=(1.1, 1.3),
                       segments=[SegmentPerformance(**segment, mae=1.0, mae_ci=(0.9, 1.1), reference_mae=1.0)])
