"""Configurable breach rules (``alerts.rules``) beside the default accuracy / ROC AUC pair.

A rule ``{metric: recall, drop: 0.05}`` breaches when the window's realised recall is ``drop`` or
more below its bar (``alerts.mode``: absolute or relative). The bar of accuracy and ROC AUC is the
one the default pair uses (the champion's baseline, raised to the reference level); the bar of
precision, recall, F1 and the served positive rate is the champion's own figure on its reference
sample at ``model.threshold`` (its MLflow baseline holds only accuracy and ROC AUC). Like the
pair, a rule is judged only with ``drift.min_labels`` labels, so an incident's health stays one
question ("is performance within every rule?").

Estimated metrics are not rule metrics: CBPE's precision, recall and F1 are point figures without
a band, and an early warning on a point estimate would page on noise (docs/parts/estimation.md).

``segment: true`` also judges every segment value on the metric (accuracy or recall, the two a
value has with an interval): its interval must lie wholly ``drop`` below the value's bar (its own
figure on the reference, or for time buckets the aggregate bar). Like the default segment rule,
it alerts people and opens no incident.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

from monitor.config import AlertsConfig, MetricRule

_EPS = 1e-12  # a drop of exactly the threshold counts despite float rounding


@dataclass(frozen=True)
class RuleReading:
    """One rule on one check: the live value, its bar, the drop, and whether it breaches."""

    metric: str
    value: float | None
    bar: float | None
    against: str
    drop: float | None
    threshold: float
    breached: bool

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "value": self.value, "bar": self.bar, "against": self.against,
                "drop": self.drop, "threshold": self.threshold, "breached": self.breached}


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def rule_readings(alerts: AlertsConfig, obs: Any) -> list[RuleReading]:
    """Every rule of ``alerts.rules`` read on one :class:`~monitor.daemon.policy.Observation`
    (callers judge only checks with enough labels)."""
    from monitor.daemon.policy import _level, drop_of
    out = []
    for rule in alerts.rules:
        if rule.metric == "accuracy":
            value, (bar, against) = obs.accuracy, _level(obs.baseline_accuracy, obs.reference_accuracy)
        elif rule.metric == "roc_auc":
            value, (bar, against) = obs.roc_auc, _level(obs.baseline_roc_auc, obs.reference_roc_auc)
        else:
            value, bar, against = obs.metrics.get(rule.metric), obs.baselines.get(rule.metric), "reference sample"
        if value is None or bar is None or not (_finite(value) and _finite(bar)):
            out.append(RuleReading(rule.metric, value, bar, against, None, rule.drop, False))
            continue
        drop = drop_of(value, bar, alerts.mode)
        out.append(RuleReading(rule.metric, value, bar, against, drop, rule.drop, drop >= rule.drop - _EPS))
    return out


def rule_breaches(readings: Iterable[RuleReading], taken: set[str]) -> list[Any]:
    """Breaches of the rules whose metric has none yet (``taken``: reasons already breached)."""
    from monitor.daemon.policy import Breach
    return [Breach(r.metric, r.value, r.bar, r.drop, r.threshold, r.against)  # type: ignore[arg-type]
            for r in readings if r.breached and r.metric not in taken]


def rule_inputs(result: Any) -> dict[str, Any]:
    """What :func:`rule_readings` needs from a check result (``Observation.metrics`` / ``baselines``).
    ``positive_rate`` is the *served* positive rate of all the window's scored rows."""
    return {"metrics": {"precision": result.precision, "recall": result.recall, "f1": result.f1,
                        "positive_rate": result.predicted_positive_rate},
            "baselines": dict(getattr(result, "baselines", None) or {})}


def rule_inputs_from(result: dict[str, Any]) -> dict[str, Any]:
    """:func:`rule_inputs` from a check result's JSON form (the check log, replayed on start-up)."""
    return {"metrics": {"precision": result.get("precision"), "recall": result.get("recall"), "f1": result.get("f1"),
                        "positive_rate": result.get("predicted_positive_rate")},
            "baselines": dict(result.get("baselines") or {})}


def segment_drops(alerts: AlertsConfig) -> dict[str, float]:
    """The drop each segment metric is judged with: accuracy at ``accuracy_drop`` unless a segment
    rule says otherwise, and each ``segment: true`` rule's metric at its drop."""
    drops = {"accuracy": alerts.accuracy_drop}
    drops.update({r.metric: r.drop for r in alerts.rules if r.segment})
    return drops


def segment_rule_breaches(alerts: AlertsConfig, obs: Any) -> list[Any]:
    """Judged segment values whose accuracy or recall interval lies wholly past their drop."""
    from monitor.daemon.policy import Breach, _level, drop_of
    out = []
    aggregate = {"accuracy": _level(obs.baseline_accuracy, obs.reference_accuracy),
                 "recall": (obs.baselines.get("recall"), "reference sample")}
    for metric, threshold in segment_drops(alerts).items():
        for s in obs.segments:
            value, ci = getattr(s, metric), getattr(s, f"{metric}_ci", None)
            if not s.judged or value is None or ci is None:
                continue
            own = getattr(s, f"reference_{metric}", None)
            bar, where = (own, f"its reference {metric}") if _finite(own) else aggregate[metric]
            if bar is None or not _finite(bar):
                continue
            if drop_of(ci[1], bar, alerts.mode) >= threshold - _EPS:
                out.append(Breach(metric, value, bar, drop_of(value, bar, alerts.mode),  # type: ignore[arg-type]
                                  threshold, where, upper=ci[1], segment=s.label))
    return out


__all__ = ["MetricRule", "RuleReading", "rule_inputs", "rule_inputs_from", "rule_readings", "rule_breaches", "segment_drops", "segment_rule_breaches"]
