"""The trainer's metrics are :mod:`monitor.stats` and :mod:`monitor.taskstats` (one metrics module
for the trainer and the monitor, so a model is never judged by two differing ROC AUCs); this module
only says which figures each task reports, from a model's served output (``predict_proba``):

============  ==========================================================================
task          figures (test, holdout, baseline ``metrics.json``, MLflow)
============  ==========================================================================
binary        accuracy (at ``model.threshold``), roc_auc, log_loss
multiclass    accuracy (most probable class), roc_auc (one-vs-rest macro), macro_f1,
              weighted_f1, log_loss (cross-entropy)
regression    mae, rmse, r2, and mape when no target is 0
============  ==========================================================================

The training loop imports :func:`binary_metrics` from here; keep it.
"""
from __future__ import annotations

import math

import numpy as np

from monitor.stats import accuracy, binary_metrics, log_loss, roc_auc

__all__ = ["accuracy", "binary_metrics", "comparison", "headline", "log_loss", "model_figures", "ranking",
           "reference_figure", "roc_auc", "served", "task_metrics"]


def served(task: str, out: np.ndarray, threshold: float = 0.5) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(prediction, score, proba)`` of a served output as window frames carry them (monitor/tasks.py):
    binary ``score > threshold``, P(1), None; multiclass the most probable class index, its
    probability, all probabilities; regression the value, the value, None."""
    out = np.asarray(out, dtype=np.float64)
    if task == "multiclass":
        pred = np.argmax(out, axis=1) if len(out) else np.zeros(0, dtype=np.int64)
        score = out[np.arange(len(out)), pred] if len(out) else np.zeros(0)
        return pred.astype(np.int64), score, out
    if task == "regression":
        return out, out, None
    return (out > threshold).astype(np.int64), out, None


def multiclass_log_loss(y: np.ndarray, proba: np.ndarray, eps: float = 1e-7) -> float:
    if not len(y):
        return math.nan
    p = np.clip(proba[np.arange(len(y)), np.asarray(y, dtype=np.int64)], eps, 1.0)
    return float(-np.mean(np.log(p)))


def task_metrics(task: str, y_true: np.ndarray, out: np.ndarray, threshold: float = 0.5) -> dict[str, float]:
    """The task's figures (see the module doc) of a served output against the targets; NaN where
    undefined (a ROC AUC with one class present, an R² of a constant target)."""
    if task == "binary":
        return binary_metrics(y_true, out, threshold)
    from monitor.taskstats import multiclass_performance, regression_performance
    nan = math.nan
    if task == "multiclass":
        y = np.asarray(y_true, dtype=np.int64)
        out = np.asarray(out, dtype=np.float64)
        pred, _, proba = served(task, out)
        perf = multiclass_performance(y, pred, proba, out.shape[1])
        return {"accuracy": nan if perf.accuracy is None else perf.accuracy,
                "roc_auc": nan if perf.roc_auc is None else perf.roc_auc,
                "macro_f1": nan if perf.macro_f1 is None else perf.macro_f1,
                "weighted_f1": nan if perf.weighted_f1 is None else perf.weighted_f1,
                "log_loss": multiclass_log_loss(y, out)}
    perf = regression_performance(np.asarray(y_true, dtype=np.float64), np.asarray(out, dtype=np.float64))
    figures = {"mae": nan if perf.mae is None else perf.mae, "rmse": nan if perf.rmse is None else perf.rmse,
               "r2": nan if perf.r2 is None else perf.r2}
    if perf.mape is not None:
        figures["mape"] = perf.mape
    return figures


def reference_figure(task: str, y_true: np.ndarray, out: np.ndarray, threshold: float = 0.5) -> float:
    """The one figure the gate's forgetting bound and the concept check compare: accuracy for a
    classifier, MAE for regression."""
    if task == "regression":
        y = np.asarray(y_true, dtype=np.float64)
        return float(np.mean(np.abs(np.asarray(out, dtype=np.float64) - y))) if len(y) else math.nan
    if task == "multiclass":
        y = np.asarray(y_true, dtype=np.int64)
        return float(np.mean(served(task, out)[0] == y)) if len(y) else math.nan
    return accuracy(y_true, out, threshold)


def headline(task: str, metrics: dict[str, float]) -> str:
    """A task's leading figures as the CLI and the log say them (binary: accuracy and ROC AUC, as always)."""
    if task == "regression":
        return f"MAE {metrics['mae']:.4g}, RMSE {metrics['rmse']:.4g}, R² {metrics['r2']:.4f}"
    if task == "multiclass":
        return (f"accuracy {metrics['accuracy']:.4f}, macro ROC AUC {metrics['roc_auc']:.4f}, "
                f"macro F1 {metrics['macro_f1']:.4f}")
    return f"accuracy {metrics['accuracy']:.4f}, ROC AUC {metrics['roc_auc']:.4f}"


def model_figures(figures: dict[str, float]) -> dict[str, float]:
    """The monitor's metric names of ``figures`` (monitor.tasks): what a baseline's ``metrics.json``
    records and the gate compares (binary: accuracy and roc_auc, as always; log_loss is the run's)."""
    from monitor.tasks import HIGHER_IS_BETTER, LOWER_IS_BETTER
    return {k: v for k, v in figures.items() if k in HIGHER_IS_BETTER or k in LOWER_IS_BETTER}


def ranking(task: str, figures: dict[str, float]) -> tuple[float, float]:
    """A sort key, higher is better: (accuracy, ROC AUC) for a classifier, (-MAE, -RMSE) for regression."""
    if task == "regression":
        return (-figures["mae"], -figures["rmse"])
    return (figures["accuracy"], figures["roc_auc"])


def comparison(task: str, challenger: dict[str, float], champion: dict[str, float]) -> dict[str, float]:
    """The run metrics of a gate comparison: ``challenger_<m>`` and ``champion_<m>`` for each
    figure, and the gains: ``accuracy_gain`` and ``roc_auc_gain`` (classifiers), ``mae_gain``
    (regression: the relative fall of the MAE, 0.05 = 5 % lower) and ``rmse_gain`` (its fall)."""
    out: dict[str, float] = {}
    lead = ["mae", "rmse"] if task == "regression" else ["accuracy", "roc_auc"]
    names = lead + [k for k in challenger if k not in lead]
    for name in names:
        out[f"challenger_{name}"] = challenger.get(name, math.nan)
    for name in names:
        out[f"champion_{name}"] = champion.get(name, math.nan)
    if task == "regression":
        old = champion["mae"]
        out["mae_gain"] = (old - challenger["mae"]) / old if old > 0 else math.nan
        out["rmse_gain"] = champion["rmse"] - challenger["rmse"]
    else:
        out["accuracy_gain"] = challenger["accuracy"] - champion["accuracy"]
        out["roc_auc_gain"] = challenger["roc_auc"] - champion["roc_auc"]
    return out
