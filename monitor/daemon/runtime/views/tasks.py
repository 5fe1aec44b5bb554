"""Which figures of a check people see, per task (``driftloop check``, ``driftloop status``,
``GET /v1/status``), by the names checks and ``alerts.rules`` use: a binary model's accuracy and
ROC AUC; a multiclass model's accuracy, one-vs-rest macro ROC AUC, macro and weighted F1 and each
class's precision and recall; a regression model's MAE, RMSE, MAPE and R².

Everything here reads a check result's JSON form (``CheckResult.to_dict()``, as the check log
stores it), so the CLI with the daemon stopped and the daemon answer alike.
"""
from __future__ import annotations

from typing import Any

from monitor.tasks import LOWER_IS_BETTER

# The realised figures of each task, headline first (the default breach: accuracy, or MAE).
REALISED: dict[str, tuple[str, ...]] = {
    "binary": ("accuracy", "roc_auc"),
    "multiclass": ("accuracy", "roc_auc", "macro_f1", "weighted_f1"),
    "regression": ("mae", "rmse", "mape", "r2"),
}
# The label-free estimates of each task (bands where the estimator gives one).
ESTIMATED: dict[str, tuple[str, ...]] = {
    "binary": ("accuracy", "roc_auc", "precision", "recall", "f1"),
    "multiclass": ("accuracy", "roc_auc", "macro_f1"),
    "regression": ("mae", "rmse"),
}
# Keys of a check result that /v1/status's last_check carries for a task, beyond binary's.
SUMMARY_KEYS: dict[str, tuple[str, ...]] = {
    "binary": (),
    "multiclass": ("classes", "macro_f1", "weighted_f1", "class_precision", "class_recall", "estimated_macro_f1",
                   "baselines"),
    "regression": ("mae", "mae_ci", "rmse", "rmse_ci", "mape", "r2", "r2_ci", "baseline_mae", "estimated_mae",
                   "estimated_mae_ci", "estimated_rmse", "estimated_rmse_ci", "baselines"),
}


def task_of(result: dict[str, Any]) -> str:
    task = result.get("task") or "binary"
    return task if task in REALISED else "binary"


def baseline_of(result: dict[str, Any], name: str) -> float | None:
    """The champion's figure on its reference: its MLflow baseline for accuracy, ROC AUC and MAE,
    its reference sample (``baselines``, the bars of ``alerts.rules``) for the rest."""
    if name in ("accuracy", "roc_auc", "mae"):
        return result.get(f"baseline_{name}")
    return (result.get("baselines") or {}).get(name)


def worse(name: str, live: float | None, base: float | None) -> float | None:
    """How much worse than its baseline a figure is, as people read it: points dropped, or for an
    error the relative rise (0.12 = 12 % higher)."""
    if live is None or base is None:
        return None
    if name in LOWER_IS_BETTER:
        return (live - base) / base if base > 0 else None
    return base - live


def realised_rows(result: dict[str, Any]) -> list[tuple[str, Any, Any, Any, Any]]:
    """``(name, live, interval, baseline, worse)`` per realised figure of the result's task."""
    out = []
    for name in REALISED[task_of(result)]:
        live, base = result.get(name), baseline_of(result, name)
        out.append((name, live, result.get(f"{name}_ci"), base, worse(name, live, base)))
    return out


def estimated_rows(result: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(name, estimate, band)`` per label-free figure of the result's task."""
    return [(name, result.get(f"estimated_{name}"), result.get(f"estimated_{name}_ci"))
            for name in ESTIMATED[task_of(result)]]


def class_rows(result: dict[str, Any]) -> list[tuple[str, Any, Any, Any]]:
    """``(class, precision, recall, recall on the reference)`` per class of a multiclass result, in
    the model's class order (classes without labelled rows in the window show no figures)."""
    precision, recall = result.get("class_precision") or {}, result.get("class_recall") or {}
    classes = result.get("classes") or sorted(set(precision) | set(recall))
    bars = result.get("baselines") or {}
    return [(c, precision.get(c), recall.get(c), bars.get(f"recall[{c}]")) for c in classes
            if c in precision or c in recall]
