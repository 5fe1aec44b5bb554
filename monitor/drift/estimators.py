"""The label-free performance estimator of each task, fitted once per champion on its reference
(``PreparedReference.calibrator``): binary and multiclass CBPE (:mod:`monitor.drift.estimation`),
regression direct loss estimation (:mod:`monitor.drift.loss_estimation`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Union

import pandas as pd

from monitor.config import ModelConfig
from monitor.drift.estimation import Calibrator, MulticlassCalibrator, fit_calibrator, fit_multiclass_calibrator
from monitor.drift.loss_estimation import LossEstimator, fit_loss_estimator

if TYPE_CHECKING:
    from monitor.drift.frames import Labelled

Estimator = Union[Calibrator, MulticlassCalibrator, LossEstimator]


def _fit_cbpe(model_cfg: ModelConfig, reference: pd.DataFrame, labelled: Labelled | None) -> Calibrator | None:
    return None if labelled is None else fit_calibrator(labelled.y, labelled.score)


def _fit_multiclass_cbpe(model_cfg: ModelConfig, reference: pd.DataFrame,
                         labelled: Labelled | None) -> MulticlassCalibrator | None:
    if labelled is None or labelled.proba is None:
        return None
    return fit_multiclass_calibrator(labelled.y, labelled.proba, labelled.pred, labelled.score)


def _fit_dle(model_cfg: ModelConfig, reference: pd.DataFrame, labelled: Labelled | None) -> LossEstimator | None:
    return fit_loss_estimator(reference, model_cfg)


#: The estimator of each problem type (:attr:`monitor.tasks.Task.problem_type`): binary and multiclass
#: CBPE on the labelled rows' scores (and probabilities), direct loss estimation on the reference's
#: features. The one place the drift package picks an estimator per task.
_FITTERS: dict[str, Callable[[ModelConfig, pd.DataFrame, "Labelled | None"], "Estimator | None"]] = {
    "classification_binary": _fit_cbpe,
    "classification_multiclass": _fit_multiclass_cbpe,
    "regression": _fit_dle,
}


def fit_estimator(model_cfg: ModelConfig, reference: pd.DataFrame, labelled: Labelled | None) -> Estimator | None:
    """The task's estimator, or None when the reference cannot fit it (no or too few labelled rows,
    a single class, multiclass rows without their probabilities)."""
    return _FITTERS[model_cfg.kind.problem_type](model_cfg, reference, labelled)
