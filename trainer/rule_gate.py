"""The promotion gate's condition for ``alerts.rules``: a challenger that a rule would flag against
the champion is not promoted.

Kept apart from :mod:`trainer.gate` (its conditions are about accuracy and ROC AUC): for each
rule, the challenger's metric on the held-out recent rows must not be ``drop`` or more below the
champion's on the same rows (``alerts.mode``). The rule's own drop is the tolerance: held-out
recall on a thousand rows moves by a couple of points between two equally good models, and
rejecting every challenger a hair worse on noise would keep a broken champion.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np

_EPS = 1e-9


def rule_metrics(y_true: Any, proba: Any, threshold: float) -> dict[str, float]:
    """Precision, recall, F1 and served positive rate at ``threshold`` (NaN when undefined)."""
    from monitor.stats import performance
    y = np.asarray(y_true, dtype=np.int64)
    s = np.asarray(proba, dtype=np.float64)
    pred = (s > threshold).astype(np.int64)
    perf = performance(y, pred, s)
    nan = float("nan")
    return {"precision": nan if perf.precision is None else perf.precision,
            "recall": nan if perf.recall is None else perf.recall,
            "f1": nan if perf.f1 is None else perf.f1,
            "positive_rate": float(pred.mean()) if len(pred) else nan}


def rule_regressions(challenger: dict[str, float], champion: dict[str, float], rules: Iterable[Any],
                     mode: str = "absolute") -> list[str]:
    """One reason per rule the challenger fails: its metric ``drop`` or more below the champion's
    (the drop as ``monitor.daemon.policy.drop_of`` measures it; the trainer does not import the daemon)."""
    failed = []
    for rule in rules:
        new, old = challenger.get(rule.metric, math.nan), champion.get(rule.metric, math.nan)
        if math.isnan(new) or math.isnan(old):
            continue  # undefined on these rows for both or one (no positives): nothing to compare
        if mode == "relative":
            drop = (old - new) / old if old > 0 else 0.0
        else:
            drop = old - new
        if drop >= rule.drop - _EPS:
            failed.append(f"worse on alerts.rules metric {rule.metric}: {new:.4f} vs champion {old:.4f} "
                          f"(drop {drop:.4f} >= {rule.drop:g})")
    return failed
