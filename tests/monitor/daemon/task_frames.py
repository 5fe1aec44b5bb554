"""Configs and real check results (``monitor.drift.evaluate_window``) of the multiclass and
regression frames of tests/monitor/drift/task_frames.py, for the daemon's per-task tests."""
from __future__ import annotations

import pandas as pd

from monitor.config import DriftloopConfig, load_config
from monitor.daemon.runtime.checks import CheckOutcome
from tests.monitor.drift.task_frames import CLASSES, FEATURES


def task_config(task: str, home, **over) -> DriftloopConfig:
    model = {"task": task, "features": FEATURES, **({"classes": CLASSES} if task == "multiclass" else {})}
    overrides = {"home": str(home), "model": model, "drift": {"min_labels": 300, "window_size": 5000},
                 "server": {"gpu_metrics": False}}
    for key, value in over.items():
        overrides[key] = {**overrides.get(key, {}), **value}
    return load_config(path=None, environ={}, overrides=overrides)


def checked(cfg: DriftloopConfig, reference: pd.DataFrame, current: pd.DataFrame, metrics: dict,
            version: str = "1") -> CheckOutcome:
    """The outcome of a check of ``current`` against ``reference`` (real evaluation)."""
    from monitor.drift import evaluate_window
    result = evaluate_window(reference, current, cfg.model, cfg.drift, metrics)
    return CheckOutcome(1.7e9, "ok", "checked", champion_version=version, result=result,
                        window_rows=result.window_rows, labelled_rows=result.labelled_rows)
