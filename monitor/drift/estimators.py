"""The label-free performance estimator of each task, fitted once per champion on its reference
(``PreparedReference.calibrator``): binary and multiclass CBPE (:mod:`monitor.drift.estimation`),
regression direct loss estimation (:mod:`monitor.drift.loss_estimation`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Union

import pandas as pd

from monitor.config import ModelConfig
from monitor.drift.estimation import Calibrator, MulticlassCalibrator, fit_calibrator, fit_multiclass_calibrator
from monitor.drift.loss_estimation import LossEstimator, fit_loss_estimator

if TYPE_CHECKING:
    from monitor.drift.frames import Labelled

Estimator = Union[Calibrator, MulticlassCalibrator, LossEstimator]


def fit_estimator(model_cfg: ModelConfig, reference: pd.DataFrame, labelled: Labelled | None) -> Estimator | None:
    """The task's estimator, or None when the reference cannot fit it (no or too few labelled rows,
    a single class, multiclass rows without their probabilities)."""
    if model_cfg.task == "regression":
        return fit_loss_estimator(reference, model_cfg)
    if labelled is None:
        return None
    if model_cfg.task == "multiclass":
        if labelled.proba is None:
            return None
        return fit_multiclass_calibrator(labelled.y, labelled.proba, labelled.pred, labelled.score)
    return fit_calibrator(labelled.y, labelled.score)
