"""The promotion gate's condition for ``alerts.rules``: a challenger that a rule would flag against
the champion is not promoted.

Kept apart from :mod:`trainer.gate` (its conditions are about accuracy and ROC AUC): for each
rule, the challenger's metric on the held-out recent rows must not be ``drop`` or more below the
champion's on the same rows (``alerts.mode``). The rule's own drop is the tolerance: held-out
recall on a thousand rows moves by a couple of points between two equally good models, and
rejecting every challenger a hair worse on noise would keep a broken champion.

Per task the metrics are the monitor's (``monitor.taskstats``): multiclass accuracy, roc_auc,
macro_f1, weighted_f1 and each class's precision and recall (a rule with ``class`` is keyed
``recall[<class>]``); regression mae, rmse, mape (worse by rising) and r2.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

from monitor.tasks import task_of

_EPS = 1e-9


def rule_metrics(y_true: Any, proba: Any, threshold: float, task: str = "binary",
                 classes: list[str] | None = None) -> dict[str, float]:
    """What alerts.rules compare, by rule key, from a served output (NaN when undefined): the task's
    (:meth:`monitor.tasks.Task.rule_figures`). Binary: precision, recall, F1 and served positive rate
    at ``threshold``."""
    return task_of(task).rule_figures(y_true, proba, threshold, classes)


def rule_regressions(challenger: dict[str, float], champion: dict[str, float], rules: Iterable[Any],
                     mode: str = "absolute") -> list[str]:
    """One reason per rule the challenger fails: its metric ``drop`` or more worse than the champion's
    (a drop, or for an error such as mae a rise, as ``monitor.daemon.decisions.policy.worsening`` measures it;
    the trainer does not import the daemon)."""
    from monitor.tasks import LOWER_IS_BETTER
    failed = []
    for rule in rules:
        key = getattr(rule, "key", rule.metric)
        new, old = challenger.get(key, math.nan), champion.get(key, math.nan)
        if math.isnan(new) or math.isnan(old):
            continue  # undefined on these rows for both or one (no positives): nothing to compare
        rises = rule.metric in LOWER_IS_BETTER
        change = new - old if rises else old - new
        if mode == "relative":
            if old > 0:
                change = change / old
            else:
                change = math.inf if rises and new > old else 0.0
        if change >= rule.drop - _EPS:
            failed.append(f"worse on alerts.rules metric {key}: {new:.4f} vs champion {old:.4f} "
                          f"({'rise' if rises else 'drop'} {change:.4f} >= {rule.drop:g})")
    return failed
