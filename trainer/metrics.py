"""The trainer's metrics are :mod:`monitor.stats` and :mod:`monitor.taskstats` (one metrics module
for the trainer and the monitor, so a model is never judged by two differing ROC AUCs); this module
only says which figures each task reports, from a model's served output (``predict_proba``); the
figures themselves are the task's (:meth:`monitor.tasks.Task.figures` and its neighbours):

============  ==========================================================================
task          figures (test, holdout, baseline ``metrics.json``, MLflow)
============  ==========================================================================
binary        accuracy (at ``model.threshold``), roc_auc, log_loss
multiclass    accuracy (most probable class), roc_auc (one-vs-rest macro), macro_f1,
              weighted_f1, log_loss (cross-entropy)
regression    mae, rmse, r2, and mape when the targets are of one sign (none 0)
============  ==========================================================================

The training loop imports :func:`binary_metrics` from here; keep it.
"""
from __future__ import annotations

import math

import numpy as np

from monitor.stats import accuracy, binary_metrics, log_loss, roc_auc
from monitor.tasks import task_of

__all__ = ["accuracy", "binary_metrics", "comparison", "headline", "log_loss", "model_figures", "ranking",
           "reference_figure", "roc_auc", "served", "task_metrics"]


def served(task: str, out: np.ndarray, threshold: float = 0.5) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(prediction, score, proba)`` of a served output as window frames carry them (monitor/tasks):
    binary ``score > threshold``, P(1), None; multiclass the most probable class index, its
    probability, all probabilities; regression the value, the value, None."""
    return task_of(task).served(out, threshold)


def task_metrics(task: str, y_true: np.ndarray, out: np.ndarray, threshold: float = 0.5) -> dict[str, float]:
    """The task's figures (see the module doc) of a served output against the targets; NaN where
    undefined (a ROC AUC with one class present, an R² of a constant target)."""
    return task_of(task).figures(y_true, out, threshold)


def reference_figure(task: str, y_true: np.ndarray, out: np.ndarray, threshold: float = 0.5) -> float:
    """The one figure the gate's forgetting bound and the concept check compare: accuracy for a
    classifier, MAE for regression."""
    return task_of(task).reference_figure(y_true, out, threshold)


def headline(task: str, metrics: dict[str, float]) -> str:
    """A task's leading figures as the CLI and the log say them (binary: accuracy and ROC AUC, as always)."""
    return task_of(task).headline(metrics)


def model_figures(figures: dict[str, float]) -> dict[str, float]:
    """The monitor's metric names of ``figures`` (monitor.tasks): what a baseline's ``metrics.json``
    records and the gate compares (binary: accuracy and roc_auc, as always; log_loss is the run's)."""
    from monitor.tasks import HIGHER_IS_BETTER, LOWER_IS_BETTER
    return {k: v for k, v in figures.items() if k in HIGHER_IS_BETTER or k in LOWER_IS_BETTER}


def ranking(task: str, figures: dict[str, float]) -> tuple[float, float]:
    """A sort key, higher is better: (accuracy, ROC AUC) for a classifier, (-MAE, -RMSE) for regression."""
    return task_of(task).ranking(figures)


def comparison(task: str, challenger: dict[str, float], champion: dict[str, float]) -> dict[str, float]:
    """The run metrics of a gate comparison: ``challenger_<m>`` and ``champion_<m>`` for each
    figure, and the gains: ``accuracy_gain`` and ``roc_auc_gain`` (classifiers), ``mae_gain``
    (regression: the relative fall of the MAE, 0.05 = 5 % lower) and ``rmse_gain`` (its fall)."""
    kind = task_of(task)
    out: dict[str, float] = {}
    lead = list(kind.lead_metrics)
    names = lead + [k for k in challenger if k not in lead]
    for name in names:
        out[f"challenger_{name}"] = challenger.get(name, math.nan)
    for name in names:
        out[f"champion_{name}"] = champion.get(name, math.nan)
    out.update(kind.gains(challenger, champion))
    return out
