"""How many labelled rows after a change point a retrain waits for (the controller's
``training_window``): sized by what the gate must see, see :func:`post_change_need`."""
from __future__ import annotations

import math

import pandas as pd

from monitor.config import DriftloopConfig
from monitor.tasks import task_of


def post_change_need(cfg: DriftloopConfig, window: pd.DataFrame, level: dict[str, float] | None) -> int:
    """Labelled rows after a change point before a retrain, sized by what the gate must see.

    ``training.post_change_rows`` (300 held-out rows by default) is what it takes to tell a small
    gain from chance. A drop that the rows after the change already prove is large needs far fewer:
    a challenger that recovers a drop ``d`` is right where the champion is wrong on about ``d`` of the
    held-out rows, and McNemar sees that with ``n >= (z_a + z_b)^2 / d`` of them (one-sided
    ``training.gate.confidence``, power 0.8), doubled for the discordance noise, at least 100. ``d`` is
    the conservative end of the served accuracy's interval against the reference level. So a
    label-starved stream (labels on a fifth of the rows, or late) retrains after a few hundred
    labelled rows of a large drop instead of a thousand; a small drop still waits the full count.
    Classification only (regression, or an explicit ``training.min_post_change_rows``, keeps it)."""
    t = cfg.training
    need = t.post_change_rows
    bar = (level or {}).get("reference_accuracy")
    if t.min_post_change_rows is not None or bar is None or len(window) < 30:
        return need
    from monitor.drift.frames import labelled_rows
    from monitor.stats import _z
    labelled = labelled_rows(window, cfg.model, "window")
    if labelled is None or len(labelled.y) < 30:
        return need
    drop = task_of(cfg.model).proven_drop(labelled.y, labelled.pred, bar, t.gate.confidence)  # regression: 0
    if drop <= 0:
        return need
    held_out = max(100, math.ceil(2 * (_z(2 * t.gate.confidence - 1) + 0.8416) ** 2 / drop))
    return int(min(need, max(t.min_rows, math.ceil(held_out / t.holdout_fraction))))
