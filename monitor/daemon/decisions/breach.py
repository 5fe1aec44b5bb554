"""The vocabulary of the alert policy, shared by :mod:`monitor.daemon.decisions.policy` (the pair, the fast
lane, estimates, drift) and :mod:`monitor.daemon.decisions.rules` (``alerts.rules`` and segments): what one
check observed (:class:`Observation`), one breach (:class:`Breach`), and how a value is measured
against its bar (:func:`worsening`, :func:`level`). Pure, and below both, so neither imports the other
back.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from monitor.daemon.decisions.kinds import PERFORMANCE_REASONS  # accuracy and roc_auc first: the default pair
from monitor.tasks import LOWER_IS_BETTER

# The policy's reasons (a metric or drift) are :class:`monitor.daemon.decisions.kinds.Reason`; a breach
# key may also name one class (recall[night]).


# Below this many labelled rows of the rarer class, a binary window's ROC AUC breaches only when its
# whole interval lies past the threshold (a 1 % positive model judged on 7 positives read 0.79
# against a 0.86 bar with nothing changed).
AUC_POINT_MIN_CLASS_ROWS = 30


def metric_of(key: str) -> str:
    """The metric of a breach key: ``recall`` of ``recall[night]`` (one class's recall)."""
    return key.split("[", 1)[0]


def is_performance_reason(reason: str | None) -> bool:
    """Whether an incident's reason (a breach key) is a performance metric (not drift, a person, ...)."""
    return reason is not None and metric_of(reason) in PERFORMANCE_REASONS


def lower_is_better(metric: str) -> bool:
    return metric_of(metric) in LOWER_IS_BETTER


@dataclass(frozen=True)
class Observation:
    """What the policy needs to know about one check."""

    labelled_rows: int
    task: str = "binary"                      # monitor.tasks: which default pair judges the check
    # (labelled rows, the newest label's time): a check that judged the same rows as the one before it
    # adds no window to alerts.sustained_windows. None: not known (a check replayed from the log).
    judged_rows: tuple[int, float] | None = None
    accuracy: float | None = None
    roc_auc: float | None = None
    baseline_accuracy: float | None = None
    baseline_roc_auc: float | None = None
    dataset_drift: bool = False
    champion_version: str | None = None
    window_rows: int | None = None
    reference_accuracy: float | None = None   # the level of good performance (see module docstring)
    reference_roc_auc: float | None = None
    change: Any = None                        # monitor.drift.changepoint.Change in the champion's rows
    # Label-free estimates of the window (monitor.drift.estimation) and the upper ends of their bands.
    estimated_accuracy: float | None = None
    estimated_accuracy_upper: float | None = None
    estimated_roc_auc: float | None = None
    estimated_roc_auc_upper: float | None = None
    segments: tuple[Any, ...] = ()            # monitor.drift.segments.SegmentPerformance of the window
    # For alerts.rules: the live precision, recall, f1, positive_rate and their bars (CheckResult.baselines).
    metrics: Mapping[str, float | None] = field(default_factory=dict)
    baselines: Mapping[str, float | None] = field(default_factory=dict)
    # Regression: the realised MAE, the champion's baseline MAE, the reference level (the lowest MAE
    # the loop has reached), and the label-free estimate with the lower end of its band.
    mae: float | None = None
    baseline_mae: float | None = None
    reference_mae: float | None = None
    estimated_mae: float | None = None
    estimated_mae_lower: float | None = None
    # The realised figure's confidence interval end nearest the bar (drift.confidence): what judges
    # a window with fewer than drift.min_labels labelled rows (label-starved streams).
    accuracy_upper: float | None = None
    mae_lower: float | None = None
    # Binary: the ROC AUC interval's upper end, and the labelled rows of the window's rarer class. ROC
    # AUC on a few rows of one class is noise (7 positives of 1,000: ±0.1); below
    # AUC_POINT_MIN_CLASS_ROWS it is judged by the upper end, as a proven drop (policy).
    roc_auc_upper: float | None = None
    minority_rows: int | None = None
    # Do the labels cover the rows after a drop? The estimate of the task's headline figure on the
    # window's labelled rows alone, and whether the window has rows newer than its newest label.
    labelled_estimate: float | None = None
    rows_after_labels: bool = False
    # The labelled rows the check needed before performance is judged, where drift.min_labels: auto
    # resolved it for the check's champion (CheckResult.min_labels); None: the policy's configured number.
    min_labels: int | None = None
    # Labels chosen by the score (monitor.drift.selection): how far each realised figure's bar moves
    # for the labelled rows ({"roc_auc": -0.057}); empty when the labels were not chosen.
    selection: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Breach:
    reason: str                 # a Reason, or one class's key (recall[night])
    value: float | None
    baseline: float | None
    drop: float | None          # how much worse than the bar: a drop, or for an error (mae, rmse, mape) a rise
    threshold: float | None
    against: str = "baseline"   # "baseline" or "reference level"
    fast: bool = False          # found by the change-point lane
    # An estimated or segment breach: the end of the band nearest the bar, which must clear the
    # threshold too (the upper end for accuracy, ROC AUC, recall; the lower end for MAE).
    bound: float | None = None
    segment: str | None = None  # a segment's breach: its label, "hour_of_day=2"
    class_name: str | None = None  # a per-class rule's class (multiclass)

    @property
    def key(self) -> str:
        """The breach's name in verdicts, incidents and metrics: the reason, or ``recall[night]``."""
        return self.reason if self.class_name is None else f"{self.reason}[{self.class_name}]"

    @property
    def estimated(self) -> bool:
        return self.bound is not None and self.segment is None

    def describe(self) -> str:
        if self.reason == "drift":
            return "dataset drift"
        lower = lower_is_better(self.reason)
        worse, side = ("rise", "down to") if lower else ("drop", "up to")
        if self.segment is not None:
            return (f"segment {self.segment}: {self.key} {self.value:.4f} (interval {side} {self.bound:.4f}) vs "
                    f"{self.against} {self.baseline:.4f} ({worse} >= {self.threshold:g}, interval clear of it)")
        if self.estimated:
            return (f"estimated {self.key} {self.value:.4f} (band {side} {self.bound:.4f}) vs {self.against} "
                    f"{self.baseline:.4f} ({worse} {self.drop:.4f} >= {self.threshold:g}, band clear of it)")
        lane = "change point: " if self.fast else ""
        return (f"{lane}{self.key} {self.value:.4f} vs {self.against} {self.baseline:.4f} "
                f"({worse} {self.drop:.4f} >= {self.threshold:g})")


def drop_of(value: float, baseline: float, mode: str) -> float:
    if mode == "relative":
        return (baseline - value) / baseline if baseline > 0 else 0.0
    return baseline - value


def rise_of(value: float, baseline: float, mode: str) -> float:
    """How far an error (lower is better) rose above its baseline, absolute or relative."""
    if mode == "relative":
        if baseline > 0:
            return (value - baseline) / baseline
        return math.inf if value > baseline else 0.0  # a perfect baseline: any error is a rise past any threshold
    return value - baseline


def worsening(metric: str, value: float, bar: float, mode: str) -> float:
    """How much worse ``value`` is than ``bar`` for ``metric``: a drop, or a rise for an error."""
    return rise_of(value, bar, mode) if lower_is_better(metric) else drop_of(value, bar, mode)


def baseline_bounds(intervals: Mapping[str, Any] | None) -> dict[str, float]:
    """The end of each of a champion's baseline intervals nearest a drop (an error's upper end,
    another figure's lower end), from ``Baseline.intervals`` (``{"accuracy": [low, high], ...}``;
    other keys and malformed entries are skipped)."""
    out: dict[str, float] = {}
    for figure, ci in (intervals or {}).items():
        if (isinstance(ci, (list, tuple)) and len(ci) == 2
                and all(isinstance(v, (int, float)) and math.isfinite(v) for v in ci)):
            out[figure] = float(ci[1] if lower_is_better(figure) else ci[0])
    return out


def own_bar(figure: str, own: float | None, level: float | None, bounds: Mapping[str, float] | None) -> float | None:
    """The champion's own figure as a bar beside a reference ``level``: the end of its baseline
    interval nearest a drop (``bounds``, :func:`baseline_bounds`). A loop-promoted champion's figure
    comes from a few hundred held-out rows and won a comparison, so its point is optimistic: 0.88 on
    150 rows (interval 0.82-0.92) made a champion serving 0.85 look 3 points down for good. Without
    a level (nothing else to judge against) or a bound, the point itself."""
    bound = (bounds or {}).get(figure)
    if own is None or level is None or bound is None or not math.isfinite(level):
        return own
    return bound


def selection_shift(result: Any) -> dict[str, float]:
    """The bar shifts a check recorded for labels chosen by the score (a CheckResult, or its dict:
    ``label_selection.shift``, :mod:`monitor.drift.selection`): ``{figure: shift}``, empty when its
    labels were not chosen (or the check predates the field)."""
    data = result.get("label_selection") if isinstance(result, Mapping) else getattr(result, "label_selection", None)
    shift = data.get("shift") if isinstance(data, Mapping) else None
    if not isinstance(shift, Mapping):
        return {}
    return {str(k): float(v) for k, v in shift.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def moved_bar(metric: str, bar: float, shift: float) -> float:
    """``bar + shift``, kept within the figure's range (an error is never below 0; accuracy and ROC
    AUC stay within 0 and 1)."""
    return max(0.0, bar + shift) if lower_is_better(metric) else min(1.0, max(0.0, bar + shift))


def realised_bar(obs: Observation, metric: str, bar: float | None, against: str) -> tuple[float | None, str]:
    """The bar a *realised* figure of ``obs`` is judged against: ``bar`` moved by the check's label
    selection shift (labels chosen by the score, :mod:`monitor.drift.selection`), kept within the
    figure's range. Label-free estimates of the whole window are judged against ``bar`` itself."""
    shift = obs.selection.get(metric)  # a figure of all the labelled rows: one class's (recall[night]) never moves
    if not shift or bar is None or not math.isfinite(bar) or not math.isfinite(shift):
        return bar, against
    return moved_bar(metric, bar, shift), f"{against} moved {shift:+.4f} for labels chosen by the score to"


def level(baseline: float | None, reference: float | None, lower: bool = False) -> tuple[float | None, str]:
    """The bar a window is judged against: the champion's baseline, raised to the reference level
    (``lower``: an error's baseline, lowered to the lowest error reached)."""
    if reference is None or not math.isfinite(reference):
        return baseline, "baseline"
    if baseline is None or not math.isfinite(baseline) or (reference < baseline if lower else reference > baseline):
        return reference, "reference level"
    return baseline, "baseline"
