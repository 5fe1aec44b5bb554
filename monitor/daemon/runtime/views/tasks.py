"""Which figures of a check people see, per task (``driftloop check``, ``driftloop status``,
``GET /v1/status``), by the names checks and ``alerts.rules`` use: a binary model's accuracy and
ROC AUC; a multiclass model's accuracy, one-vs-rest macro ROC AUC, macro and weighted F1 and each
class's precision and recall; a regression model's MAE, RMSE, MAPE and R².

Everything here reads a check result's JSON form (``CheckResult.to_dict()``, as the check log
stores it), so the CLI with the daemon stopped and the daemon answer alike.
"""
from __future__ import annotations

from typing import Any

from monitor.tasks import BINARY, LOWER_IS_BETTER, Task
from monitor.tasks import task_of as task_named

def task_of(result: dict[str, Any]) -> Task:
    """The task of a check result's JSON form; a result of an older or unknown task reads as binary
    (check logs written before tasks existed carry none)."""
    try:
        return task_named(result.get("task") or "binary")
    except ValueError:
        return BINARY


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
    for name in task_of(result).realised_figures:
        live, base = result.get(name), baseline_of(result, name)
        out.append((name, live, result.get(f"{name}_ci"), base, worse(name, live, base)))
    return out


def estimated_rows(result: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(name, estimate, band)`` per label-free figure of the result's task."""
    return [(name, result.get(f"estimated_{name}"), result.get(f"estimated_{name}_ci"))
            for name in task_of(result).estimated_figures]


def class_rows(result: dict[str, Any]) -> list[tuple[str, Any, Any, Any]]:
    """``(class, precision, recall, recall on the reference)`` per class of a multiclass result, in
    the model's class order (classes without labelled rows in the window show no figures)."""
    precision, recall = result.get("class_precision") or {}, result.get("class_recall") or {}
    classes = result.get("classes") or sorted(set(precision) | set(recall))
    bars = result.get("baselines") or {}
    return [(c, precision.get(c), recall.get(c), bars.get(f"recall[{c}]")) for c in classes
            if c in precision or c in recall]
