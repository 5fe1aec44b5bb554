"""How many labelled rows a window needs before its performance is judged: ``drift.min_labels``.

A number is used as it is. ``auto`` (the default) asks the champion, once per version: for each of
the task's default alert figures (:meth:`monitor.tasks.Task.default_rules`: a classifier's accuracy
and ROC AUC, a regressor's MAE and MAPE) the rows ``n`` at which the figure's standard error on ``n``
labelled rows is at most a third of its alert threshold (``alerts.accuracy_drop``, ``auc_drop``,
``mae_rise``, ``mape_rise``; a relative threshold times the champion's figure). The largest of them,
clamped to ``MIN_LABELS_AUTO`` (200 to 1000), is the need:

* accuracy: binomial, from the champion's baseline accuracy ``p``: ``n = 9 p (1 - p) / drop²``
  (0.97: 291 rows; 0.90: 900; 0.85 and below: 1000, the ceiling);
* any other figure: a bootstrap of the champion's reference sample (its labelled rows, at most
  :data:`BOOTSTRAP_ROWS`, :data:`RESAMPLES` seeded resamples) gives the figure's standard error at the
  sample's size ``m``; it falls as ``1 / sqrt(n)``, so ``n = 9 m SE_m² / threshold²``;
* a figure the reference cannot give (no labelled rows, one class, a MAPE with zero targets, the
  residuals' shift, measured in their own standard deviations) sets no need.

Why a third: with the standard error at a third of the threshold a healthy window's figure lies
within two thirds of the threshold of the baseline 95 % of the time, so a drop past the threshold is
a real one. A model with 97 % accuracy is judged on about 300 labels; a tabular model near 85 % still
waits for 1000, as before ``auto``. Without a baseline to ask (no champion yet, no labelled
reference) the need is the ceiling.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import pandas as pd

from monitor.config import AlertsConfig, DriftConfig, ModelConfig
from monitor.config.checks import MIN_LABELS_AUTO
from monitor.drift.rows import Labelled, labelled_rows
from monitor.errors import DataError

SE_SHARE = 1 / 3          # the standard error a figure may have, as a share of its threshold
BOOTSTRAP_ROWS = 2000     # reference rows the bootstrap resamples (a seeded sample of them)
RESAMPLES = 200           # SE's own relative error about 1 / sqrt(2 x 200): 5 % (n's: 10 %)
SEED = 20_250_601


@dataclass(frozen=True)
class LabelsNeeded:
    """What a window of one champion must hold to be judged on performance: ``value`` labelled rows;
    ``auto``: resolved from the champion (else configured); ``needs``: each default figure's rows
    before the clamp (auto only), the largest of which set ``value``."""

    value: int
    auto: bool = False
    needs: Mapping[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        """e.g. ``300 (auto: accuracy 291, roc_auc 12 rows; at least 200, at most 1000)``."""
        if not self.auto:
            return f"{self.value} (configured)"
        if not self.needs:
            return f"{self.value} (auto: no baseline to size it from)"
        each = ", ".join(f"{k} {v}" for k, v in self.needs.items())
        return f"{self.value} (auto: {each} rows; at least {MIN_LABELS_AUTO[0]}, at most {MIN_LABELS_AUTO[1]})"

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "auto": self.auto, "needs": dict(self.needs)}


def resolve_min_labels(drift: DriftConfig, alerts: AlertsConfig, model: ModelConfig,
                       baseline_metrics: Mapping[str, Any] | None, reference: pd.DataFrame | None) -> LabelsNeeded:
    """``drift.min_labels`` for the champion whose baseline metrics and reference sample are given."""
    if isinstance(drift.min_labels, int):
        return LabelsNeeded(drift.min_labels)
    try:
        labelled = labelled_rows(reference, model, "reference") if reference is not None else None
    except DataError:  # the check reports a reference it cannot read; here it just sizes nothing
        labelled = None
    needs = auto_needs(model, alerts, baseline_metrics or {}, labelled)
    low, high = MIN_LABELS_AUTO
    value = min(high, max(low, max(needs.values()))) if needs else high
    return LabelsNeeded(value, auto=True, needs=needs)


def auto_needs(model: ModelConfig, alerts: AlertsConfig, baseline: Mapping[str, Any],
               labelled: Labelled | None) -> dict[str, int]:
    """Each default alert figure's rows (before the clamp) that its standard error asks for."""
    task = model.kind
    own = _performance(model, labelled) if labelled is not None and len(labelled) else None
    needs: dict[str, int] = {}
    rules = task.default_rules(alerts)
    bootstrapped: dict[str, float] | None = None
    for metric, threshold, mode in rules:
        level = _finite(baseline.get(metric))
        if level is None and own is not None:
            level = _finite(getattr(own, metric, None))
        if level is None:
            continue
        bar = threshold * abs(level) if mode == "relative" else threshold
        if bar <= 0:
            continue
        if metric == "accuracy":
            n = level * (1 - level) / (SE_SHARE * bar) ** 2 if 0 < level < 1 else 0.0
        else:
            if bootstrapped is None:
                others = [k for k, _, _ in rules if k != "accuracy"]
                bootstrapped = _bootstrap_se(model, labelled, others) if labelled is not None else {}
            se = bootstrapped.get(metric)
            if se is None:
                continue
            n = bootstrapped["rows"] * (se / (SE_SHARE * bar)) ** 2
        needs[metric] = int(math.ceil(n - 1e-9))  # 9 x 0.97 x 0.03 / 0.03² is 291, not 291.0000000001
    return needs


def _performance(model: ModelConfig, rows: Labelled, positions: np.ndarray | None = None) -> Any:
    take = (lambda a: a) if positions is None else (lambda a: a[positions])
    return model.kind.performance(take(rows.y), take(rows.pred), take(rows.score),
                                  None if rows.proba is None else take(rows.proba), model.n_classes)


def _bootstrap_se(model: ModelConfig, labelled: Labelled, metrics: list[str]) -> dict[str, float]:
    """Each of ``metrics``' standard error over resamples of the reference's labelled rows, and the
    rows resampled (``rows``); a figure undefined on some resample (one class drawn) is left out."""
    rng = np.random.default_rng(SEED)
    n = len(labelled)
    base = rng.choice(n, size=BOOTSTRAP_ROWS, replace=False) if n > BOOTSTRAP_ROWS else np.arange(n)
    m = len(base)
    if m < 30:
        return {}
    values: dict[str, list[float]] = {k: [] for k in metrics}
    for _ in range(RESAMPLES):
        perf = _performance(model, labelled, base[rng.integers(0, m, size=m)])
        for k in metrics:
            v = _finite(getattr(perf, k, None))
            if v is not None:
                values[k].append(v)
    out: dict[str, float] = {"rows": float(m)}
    out.update({k: float(np.std(v, ddof=1)) for k, v in values.items() if len(v) == RESAMPLES})
    return out


def _finite(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


class MinLabels:
    """``drift.min_labels`` of one model, resolved once per champion version (a bootstrap costs up to
    a few hundred milliseconds) and remembered: :attr:`last` is the latest, for what must size a
    window before the champion is loaded (the configured number, or the ceiling, before any)."""

    def __init__(self, drift: DriftConfig, alerts: AlertsConfig, model: ModelConfig):
        self._drift, self._alerts, self._model = drift, alerts, model
        self._by_version: dict[str, LabelsNeeded] = {}
        self.last = LabelsNeeded(drift.min_labels_at_most, auto=not isinstance(drift.min_labels, int))

    def of(self, version: str, baseline_metrics: Mapping[str, Any] | None,
           reference: pd.DataFrame | None) -> LabelsNeeded:
        found = self._by_version.get(str(version))
        if found is None:
            found = resolve_min_labels(self._drift, self._alerts, self._model, baseline_metrics, reference)
            self._by_version = {**dict(list(self._by_version.items())[-3:]), str(version): found}
        self.last = found
        return found
