"""The attainable level: what the best model can reach on the evidence since a change of concept.

After a change of concept the old level may be out of reach for any model (NannyML's multiclass
drop: the best gradient-boosting model fitted on post-drop rows reaches 0.606 against the old
0.770). Judged against the old level the incident would never end and the loop would retrain
after every few thousand labels for ever. Each settled retrain of a performance incident that
trained on rows after the change point measures the best figure attainable now: the better of the
challenger and the champion on the held-out post-change rows, with a normal-approximation interval
(accuracy: binomial; MAE: the absolute residuals' spread taken as their mean, as for an
exponential). When ``alerts.attainable_after`` such retrains in a row find even the interval's
best end short of the bar by the alert threshold, the loop records the attainable level as an
explicit decision with its evidence, judges later checks against it and ends the incident. A
lower level is never silent: it is an incident event, a status field and an MLflow run tag.

Pure: no I/O (the settlement reads the metrics and writes the decision).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping

from monitor.daemon.decisions.breach import drop_of, lower_is_better

Z = 1.96  # 95 % two-sided: the interval a person reads next to the level


@dataclass(frozen=True)
class Attainable:
    figure: str            # the task's primary figure (accuracy, mae)
    value: float           # the best of challenger and champion on held-out post-change rows
    lower: float
    upper: float
    rows: int              # held-out rows it was measured on
    roc_auc: float | None = None  # classifiers: the best ROC AUC on the same rows (its level too)

    @property
    def best_end(self) -> float:
        """The end of the interval most favourable to reaching the bar."""
        return self.lower if lower_is_better(self.figure) else self.upper

    def short_of(self, bar: float, threshold: float, mode: str = "absolute") -> bool:
        """Whether even the interval's best end misses ``bar`` by ``threshold`` or more (the alert
        threshold: an absolute or relative drop; for an error, a relative rise)."""
        if lower_is_better(self.figure):
            rise = (self.best_end - bar) / bar if bar > 0 else 0.0
            return rise >= threshold
        return drop_of(self.best_end, bar, mode) >= threshold

    def describe(self) -> str:
        half = (self.upper - self.lower) / 2
        return f"{self.figure} {self.value:.4f} ± {half:.4f} on {self.rows} held-out post-change rows"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def attainable_from(metrics: Mapping[str, Any], figure: str) -> Attainable | None:
    """The attainable figure a retrain's run metrics show (``challenger_<figure>``,
    ``champion_<figure>``, ``holdout_rows``), or None when they do not say."""
    def number(key: str) -> float | None:
        v = metrics.get(key)
        return float(v) if isinstance(v, (int, float)) and math.isfinite(float(v)) else None

    values = [v for v in (number(f"challenger_{figure}"), number(f"champion_{figure}")) if v is not None]
    rows = number("holdout_rows")
    if not values or not rows or rows < 1:
        return None
    lower_better = lower_is_better(figure)
    value = min(values) if lower_better else max(values)
    if lower_better:
        half = Z * value / math.sqrt(rows)
        lower, upper = max(0.0, value - half), value + half
    else:
        p = min(max(value, 0.0), 1.0)
        half = Z * math.sqrt(p * (1 - p) / rows)
        lower, upper = max(0.0, value - half), min(1.0, value + half)
    aucs = [v for v in (number("challenger_roc_auc"), number("champion_roc_auc")) if v is not None]
    return Attainable(figure, value, lower, upper, int(rows), max(aucs) if aucs else None)


def bar_of(figure: str, level: float | None, baseline: float | None) -> float | None:
    """The bar checks are judged against: the better of the reference level and the baseline."""
    known = [v for v in (level, baseline) if v is not None]
    if not known:
        return None
    return min(known) if lower_is_better(figure) else max(known)
