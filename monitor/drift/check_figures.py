"""The figures of a check's performance: measured on all the window's labelled rows
(:meth:`monitor.tasks.Task.performance`) and estimated without labels on all its scored rows
(binary or multiclass CBPE, :mod:`monitor.drift.estimation`; regression direct loss estimation,
:mod:`monitor.drift.loss_estimation`), as :class:`monitor.drift.result.CheckResult` fields.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas as pd

from monitor.config import DriftConfig, ModelConfig
from monitor.drift.estimation import (MulticlassCalibrator, estimate, estimate_multiclass, expected_accuracy,
                                      expected_multiclass_accuracy)
from monitor.drift.estimators import Estimator
from monitor.drift.frames import Labelled, PreparedReference, Scored, class_names, scored_rows
from monitor.drift.loss_estimation import LossEstimator, estimate_loss
from monitor.stats import Performance


def estimator_figures(estimator: Estimator, frame: pd.DataFrame, scored: Scored | None,
                      confidence: float) -> dict[str, Any]:
    """The estimator's figures on ``frame``'s rows, by name: ``rows``, then each figure and, where
    it has one, its band (``accuracy``, ``accuracy_ci``, ...). Binary CBPE: accuracy, ROC AUC,
    precision, recall, F1; multiclass CBPE: accuracy, ROC AUC, macro F1; direct loss estimation:
    MAE, RMSE. ``scored`` is ``frame``'s scored rows (what the calibrators read); empty when the
    estimator cannot estimate these rows. The one place the figures are read per estimator."""
    if isinstance(estimator, LossEstimator):
        loss = estimate_loss(estimator, frame, confidence)
        if loss is None:
            return {}
        return {"rows": loss.rows, "mae": loss.mae, "mae_ci": loss.mae_ci, "rmse": loss.rmse, "rmse_ci": loss.rmse_ci}
    if scored is None or not len(scored.score):
        return {}
    if isinstance(estimator, MulticlassCalibrator):
        mc = (None if scored.proba is None else
              estimate_multiclass(estimator, scored.proba, scored.pred, scored.score, confidence))
        if mc is None:
            return {}
        return {"rows": mc.rows, "accuracy": mc.accuracy, "accuracy_ci": mc.accuracy_ci, "roc_auc": mc.roc_auc,
                "roc_auc_ci": mc.roc_auc_ci, "macro_f1": mc.macro_f1}
    est = estimate(estimator, scored.score, scored.pred, confidence)
    if est is None:
        return {}
    return {"rows": est.rows, "accuracy": est.accuracy, "accuracy_ci": est.accuracy_ci, "roc_auc": est.roc_auc,
            "roc_auc_ci": est.roc_auc_ci, "precision": est.precision, "recall": est.recall, "f1": est.f1}


def estimated_figures(ref: PreparedReference, current: pd.DataFrame, labelled: Labelled | None,
                      model_cfg: ModelConfig, drift_cfg: DriftConfig, realised: float | None) -> dict[str, Any]:
    """The label-free figures of the check (CheckResult's ``estimated_*``, and the served positive
    rate of a binary model), by the reference's estimator (:func:`estimator_figures`), and the
    estimate's error on the labelled rows (``estimation_error``: realised minus expected accuracy)."""
    scored = scored_rows(current, model_cfg, "current window")
    out: dict[str, Any] = {}
    if scored is None or not len(scored.score):
        return out
    out.update({f"predicted_{name}": v for name, v in model_cfg.kind.served_figures(scored.pred).items()})
    estimator = ref.calibrator
    if not drift_cfg.estimate or estimator is None:
        return out
    figures = estimator_figures(estimator, current, scored, drift_cfg.confidence)
    out.update({f"estimated_{name}": v for name, v in figures.items()})
    if figures and realised is not None and labelled is not None and len(labelled):
        on_labelled = _expected_accuracy(estimator, labelled)
        if on_labelled is not None:
            out["estimation_error"] = realised - on_labelled
    return out


def _expected_accuracy(estimator: Estimator, labelled: Labelled) -> float | None:
    """A classifier's expected accuracy on the labelled rows (None for regression)."""
    if isinstance(estimator, MulticlassCalibrator):
        return (None if labelled.proba is None else
                expected_multiclass_accuracy(estimator, labelled.proba, labelled.pred, labelled.score))
    if isinstance(estimator, LossEstimator):
        return None
    return expected_accuracy(estimator, labelled.score, labelled.pred)


def measured_performance(labelled: Labelled | None, model_cfg: ModelConfig, confidence: float) -> Performance:
    """The task's figures on all the window's labelled rows (none: a performance of 0 rows)."""
    task = model_cfg.kind
    if labelled is None:
        empty = np.empty(0)
        return task.performance(empty, empty, empty, None, model_cfg.n_classes, confidence)
    return task.performance(labelled.y, labelled.pred, labelled.score, labelled.proba, model_cfg.n_classes,
                            confidence)


def task_figures(perf: Performance, model_cfg: ModelConfig, baseline: Mapping[str, Any],
                 reference: Mapping[str, float] | None = None) -> dict[str, Any]:
    """CheckResult's fields of the task beyond accuracy and ROC AUC (per-class figures by class name),
    and those measured against the champion's figures on its reference (``reference``:
    ``PreparedReference.metrics``; regression's ``residual_shift``)."""
    return {"task": model_cfg.task,
            **model_cfg.kind.check_fields(perf, class_names(model_cfg), model_cfg.classes, baseline),
            **model_cfg.kind.reference_shift_fields(perf, reference or {})}


def float_or_none(x: Any) -> float | None:
    try:
        return None if x is None else float(x)
    except (TypeError, ValueError):
        return None
