"""Configurable breach rules (``alerts.rules``) beside the task's default breaches.

A rule ``{metric: recall, drop: 0.05}`` breaches when the window's realised recall is ``drop`` or
more below its bar (``alerts.mode``: absolute or relative); for an error (``mae``, ``rmse``,
``mape``: lower is better, :data:`monitor.tasks.LOWER_IS_BETTER`) ``drop`` is a *rise* above the
bar. The bar of accuracy and ROC AUC is the one the default pair uses (the champion's baseline,
raised to the reference level), and of MAE the one the regression default uses (the champion's
baseline MAE, lowered to the lowest MAE the loop has reached); the bar of every other metric is
the champion's own figure on its reference sample (``CheckResult.baselines``, keyed like the rule:
``precision``, ``recall``, ``f1``, ``positive_rate`` at ``model.threshold``; ``macro_f1``,
``weighted_f1``, ``recall[<class>]``, ``precision[<class>]``; ``rmse``, ``mape``, ``r2``). Like
the pair, a rule is judged only with ``drift.min_labels`` labels, so an incident's health stays
one question ("is performance within every rule?").

Which metrics a task has (``monitor.config.RULE_METRIC_TASKS``) is checked when the config is
loaded if ``model.task`` is set there, and otherwise once the champion's task is known
(:func:`check_rules_fit`, at start-up of ``driftloop serve`` and ``driftloop check``).

Estimated metrics are not rule metrics: CBPE's precision, recall and F1 are point figures without
a band, and an early warning on a point estimate would page on noise (docs/parts/estimation.md).

``segment: true`` also judges every segment value on the metric (accuracy or recall, the two a
value has with an interval; a regression model's segment values are judged on MAE when they
carry it): its interval must lie wholly ``drop`` past the value's bar (its own figure on the
reference, or for time buckets the aggregate bar). Like the default segment rule, it alerts
people and opens no incident.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from monitor.config import RULE_METRIC_TASKS, AlertsConfig, DriftloopConfig, MetricRule
from monitor.daemon.decisions.breach import Breach, level, lower_is_better, metric_of, realised_bar, worsening
from monitor.errors import ConfigError
from monitor.finite import is_finite
from monitor.tasks import TASKS, Task, task_of

_EPS = 1e-12  # a drop of exactly the threshold counts despite float rounding
# CheckResult fields of the same name
_RESULT_METRICS = ("macro_f1", "weighted_f1", "mae", "rmse", "mape", "r2", "residual_shift")


@dataclass(frozen=True)
class RuleReading:
    """One rule on one check: the live value, its bar, how much worse (a drop, or an error's rise),
    and whether it breaches. ``metric`` is the rule's key: ``recall``, or ``recall[night]``."""

    metric: str
    value: float | None
    bar: float | None
    against: str
    drop: float | None
    threshold: float
    breached: bool
    class_name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "value": self.value, "bar": self.bar, "against": self.against,
                "drop": self.drop, "threshold": self.threshold, "breached": self.breached}


def rule_readings(alerts: AlertsConfig, obs: Any) -> list[RuleReading]:
    """Every rule of ``alerts.rules`` read on one :class:`~monitor.daemon.decisions.breach.Observation`
    (callers judge only checks with enough labels)."""
    out = []
    for rule in alerts.rules:
        key = rule.key
        if rule.metric == "accuracy":
            value, (bar, against) = obs.accuracy, realised_bar(obs, "accuracy", *level(obs.baseline_accuracy,
                                                                                        obs.reference_accuracy))
        elif rule.metric == "roc_auc":
            value, (bar, against) = obs.roc_auc, realised_bar(obs, "roc_auc", *level(obs.baseline_roc_auc,
                                                                                      obs.reference_roc_auc))
        elif rule.metric == "mae":
            value, (bar, against) = obs.mae, realised_bar(obs, "mae", *level(obs.baseline_mae, obs.reference_mae,
                                                                              lower=True))
        else:
            value, (bar, against) = obs.metrics.get(key), realised_bar(obs, key, obs.baselines.get(key),
                                                                       "reference sample")
        if value is None or bar is None or not (is_finite(value) and is_finite(bar)):
            out.append(RuleReading(key, value, bar, against, None, rule.drop, False, rule.class_name))
            continue
        worse = worsening(rule.metric, value, bar, alerts.mode)
        out.append(RuleReading(key, value, bar, against, worse, rule.drop, worse >= rule.drop - _EPS, rule.class_name))
    return out


def rule_breaches(readings: Iterable[RuleReading], taken: set[str]) -> list[Any]:
    """Breaches of the rules whose key has none yet (``taken``: breach keys already found)."""
    return [Breach(metric_of(r.metric), r.value, r.bar, r.drop, r.threshold, r.against,
                   class_name=r.class_name)
            for r in readings if r.breached and r.metric not in taken]


def _class_figures(name: str, by_class: Any) -> dict[str, Any]:
    return {f"{name}[{c}]": v for c, v in (by_class or {}).items()}


def rule_inputs(result: Any) -> dict[str, Any]:
    """What :func:`rule_readings` needs from a check result (``Observation.metrics`` / ``baselines``).
    ``positive_rate`` is the *served* positive rate of all the window's scored rows."""
    metrics = {"precision": result.precision, "recall": result.recall, "f1": result.f1,
               "positive_rate": result.predicted_positive_rate,
               **{name: getattr(result, name, None) for name in _RESULT_METRICS},
               **_class_figures("recall", getattr(result, "class_recall", None)),
               **_class_figures("precision", getattr(result, "class_precision", None))}
    return {"metrics": metrics, "baselines": dict(getattr(result, "baselines", None) or {})}


def rule_inputs_from(result: dict[str, Any]) -> dict[str, Any]:
    """:func:`rule_inputs` from a check result's JSON form (the check log, replayed on start-up)."""
    metrics = {"precision": result.get("precision"), "recall": result.get("recall"), "f1": result.get("f1"),
               "positive_rate": result.get("predicted_positive_rate"),
               **{name: result.get(name) for name in _RESULT_METRICS},
               **_class_figures("recall", result.get("class_recall")),
               **_class_figures("precision", result.get("class_precision"))}
    return {"metrics": metrics, "baselines": dict(result.get("baselines") or {})}


def rule_problems(rules: Iterable[MetricRule], task: str | Task, classes: list[str] | None) -> list[str]:
    """Why each rule cannot judge a ``task`` model (with ``classes``): a metric the task does not
    have, a class it does not know, a class missing or superfluous. Empty when all fit."""
    out = []
    kind = task_of(task)
    for r in rules:
        if kind not in RULE_METRIC_TASKS.get(r.metric, TASKS):
            out.append(f"{r.key} does not apply to a {kind} model")
        elif (problem := kind.rule_class_problem(r.key, r.metric, r.class_name)) is not None:
            out.append(problem)
        elif r.class_name is not None and classes is not None and r.class_name not in classes:
            out.append(f"{r.key}: {r.class_name!r} is not one of the model's classes ({', '.join(classes)})")
    return out


def check_rules_fit(cfg: DriftloopConfig) -> None:
    """ConfigError (all problems in one message) when ``alerts.rules`` do not fit the model's task.
    Only once the task is known: configured, or applied from the champion (``with_champion_schema``)."""
    if not cfg.model.task_configured:
        return
    problems = rule_problems(cfg.alerts.rules, cfg.model.task, cfg.model.classes)
    if problems:
        raise ConfigError("alerts.rules: " + "; ".join(problems) + " (docs: Tasks, which metrics each task has)")


def segment_drops(alerts: AlertsConfig, task: str | Task = "binary") -> dict[str, tuple[float, str]]:
    """The drop (and mode) each segment metric is judged with: a classifier's accuracy at
    ``accuracy_drop`` and a regression model's MAE at ``mae_rise`` (relative) unless a segment
    rule says otherwise, and each ``segment: true`` rule's metric at its drop."""
    metric, threshold, mode = task_of(task).default_rules(alerts)[0]
    drops = {metric: (threshold, mode)}
    drops.update({r.metric: (r.drop, alerts.mode) for r in alerts.rules if r.segment})
    return drops


def segment_rule_breaches(alerts: AlertsConfig, obs: Any) -> list[Any]:
    """Judged segment values whose accuracy or recall interval (a regression model's MAE interval)
    lies wholly past their drop."""
    out = []
    aggregate = {"accuracy": level(obs.baseline_accuracy, obs.reference_accuracy),
                 "recall": (obs.baselines.get("recall"), "reference sample"),
                 "mae": level(obs.baseline_mae, obs.reference_mae, lower=True)}
    for metric, (threshold, mode) in segment_drops(alerts, obs.task).items():
        lower = lower_is_better(metric)
        for s in obs.segments:
            value, ci = getattr(s, metric, None), getattr(s, f"{metric}_ci", None)
            if not s.judged or value is None or ci is None:
                continue
            own = getattr(s, f"reference_{metric}", None)
            bar, where = (own, f"its reference {metric}") if is_finite(own) else aggregate[metric]
            if bar is None or not is_finite(bar):
                continue
            bound = ci[0] if lower else ci[1]  # the interval's end nearest the bar
            if worsening(metric, bound, bar, mode) >= threshold - _EPS:
                out.append(Breach(metric, value, bar, worsening(metric, value, bar, mode),
                                  threshold, where, bound=bound, segment=s.label))
    return out


__all__ = ["MetricRule", "RuleReading", "check_rules_fit", "rule_inputs", "rule_inputs_from", "rule_problems",
           "rule_readings", "rule_breaches", "segment_drops", "segment_rule_breaches"]
