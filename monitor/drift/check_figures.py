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
from monitor.drift.frames import Labelled, PreparedReference, class_names, scored_rows
from monitor.drift.loss_estimation import LossEstimator, estimate_loss
from monitor.stats import Performance


def estimated_figures(ref: PreparedReference, current: pd.DataFrame, labelled: Labelled | None,
                      model_cfg: ModelConfig, drift_cfg: DriftConfig, realised: float | None) -> dict[str, Any]:
    """The label-free figures of the check (CheckResult's ``estimated_*``, and the served positive
    rate of a binary model), by the reference's estimator: binary or multiclass CBPE, or regression
    direct loss estimation."""
    scored = scored_rows(current, model_cfg, "current window")
    out: dict[str, Any] = {}
    if scored is None or not len(scored.score):
        return out
    out.update({f"predicted_{name}": v for name, v in model_cfg.kind.served_figures(scored.pred).items()})
    estimator = ref.calibrator
    if not drift_cfg.estimate or estimator is None:
        return out
    if isinstance(estimator, LossEstimator):
        loss = estimate_loss(estimator, current, drift_cfg.confidence)
        if loss is not None:
            out.update(estimated_rows=loss.rows, estimated_mae=loss.mae, estimated_mae_ci=loss.mae_ci,
                       estimated_rmse=loss.rmse, estimated_rmse_ci=loss.rmse_ci)
        return out
    if isinstance(estimator, MulticlassCalibrator):
        if scored.proba is None:
            return out
        mc = estimate_multiclass(estimator, scored.proba, scored.pred, scored.score, drift_cfg.confidence)
        if mc is None:
            return out
        out.update(estimated_rows=mc.rows, estimated_accuracy=mc.accuracy, estimated_accuracy_ci=mc.accuracy_ci,
                   estimated_roc_auc=mc.roc_auc, estimated_roc_auc_ci=mc.roc_auc_ci, estimated_macro_f1=mc.macro_f1)
        if realised is not None and labelled is not None and len(labelled) and labelled.proba is not None:
            on_labelled = expected_multiclass_accuracy(estimator, labelled.proba, labelled.pred, labelled.score)
            if on_labelled is not None:
                out["estimation_error"] = realised - on_labelled
        return out
    est = estimate(estimator, scored.score, scored.pred, drift_cfg.confidence)
    if est is None:
        return out
    out.update(estimated_rows=est.rows, estimated_accuracy=est.accuracy, estimated_accuracy_ci=est.accuracy_ci,
               estimated_roc_auc=est.roc_auc, estimated_roc_auc_ci=est.roc_auc_ci,
               estimated_precision=est.precision, estimated_recall=est.recall, estimated_f1=est.f1)
    if realised is not None and labelled is not None and len(labelled):
        on_labelled = expected_accuracy(estimator, labelled.score, labelled.pred)
        if on_labelled is not None:
            out["estimation_error"] = realised - on_labelled
    return out


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
