"""Where did performance change? A change-point scan of the labelled per-row error stream.

The window's labelled rows of one model version, in time order, give a per-row loss stream
(:meth:`monitor.tasks.Task.per_row_loss`): 0/1 "was this prediction wrong" for a classifier, the
absolute error for regression. A concept change shows up as a step up in that stream.
:func:`find_change` scans every candidate split (on a grid) with the two-sample z statistic of
"the mean loss after the split is higher than before" (for a 0/1 stream this is the
two-proportion z of accuracy) and keeps the strongest one; it is a change only when that
statistic clears ``z_min``, which is set high enough (default 4.0) that scanning many splits of a
stationary stream does not cross it by chance (the maximum of a Brownian bridge's scan exceeds 4
standard deviations with probability well under 1 %). Absolute errors have a long right tail, so
their scan statistic is computed on the stream clipped at its 99th percentile (a few huge errors
are not a step); the figures reported (MAE before and after) are the raw means.

This is the offline counterpart of CUSUM / Page-Hinkley (a likelihood-ratio scan for one step in
a mean): it sees the whole window at once, so it needs no warm-up or tuning of a drift rate, and
it returns *where* the change happened, which is what retraining needs: rows after the change
are the new concept, rows before it are not.

:func:`fast_breach` is the "fast lane" in front of the windowed rule: it fires only when the rows
after the change are enough (``min_rows``) and, with ``confidence`` (one-sided), their accuracy is
at least ``drop`` below the baseline (Wilson bound) or, for regression, their MAE at least
``rise`` (relative) above the baseline MAE (normal bound of the mean absolute error). A change of
1.5 points never satisfies a 3-point rule however many rows arrive; a collapse to coin-flipping
does within a couple of hundred rows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from monitor.stats import wilson_interval
from monitor.tasks import task_of

CLIP_QUANTILE = 0.99  # absolute errors above it are clipped for the scan statistic only


@dataclass(frozen=True)
class Change:
    """A step in a labelled error stream. Classifiers: the share of right rows before and after
    (``accuracy_*``); regression: the mean absolute error before and after (``mae_*``) and the
    standard deviation of the absolute errors after it (their interval, for the fast lane)."""

    index: int               # first row after the change (position in the stream)
    rows_before: int
    rows_after: int
    accuracy_before: float | None
    accuracy_after: float | None
    z: float                 # the scan statistic at the chosen split
    mae_before: float | None = None
    mae_after: float | None = None
    mae_after_sd: float | None = None

    @property
    def metric(self) -> str:
        """The figure the change is told in: ``accuracy`` (classifiers) or ``mae`` (regression)."""
        return "mae" if self.mae_after is not None else "accuracy"

    @property
    def before(self) -> float:
        return float(self.mae_before if self.metric == "mae" else self.accuracy_before)  # type: ignore[arg-type]

    @property
    def after(self) -> float:
        return float(self.mae_after if self.metric == "mae" else self.accuracy_after)  # type: ignore[arg-type]

    @property
    def worsening(self) -> float:
        """How much worse after than before: accuracy points lost, or the relative MAE rise."""
        if self.metric == "mae":
            return (self.after - self.before) / self.before if self.before > 0 else math.inf
        return self.before - self.after

    def describe(self) -> str:
        return f"{self.metric} {self.before:.4f} -> {self.after:.4f}"

    def to_dict(self) -> dict:
        return {"index": self.index, "rows_before": self.rows_before, "rows_after": self.rows_after,
                "accuracy_before": self.accuracy_before, "accuracy_after": self.accuracy_after, "z": self.z,
                "metric": self.metric, "mae_before": self.mae_before, "mae_after": self.mae_after,
                "mae_after_sd": self.mae_after_sd}


def _scan(loss: np.ndarray, min_segment: int, z_min: float, step: int | None) -> tuple[int, float] | None:
    """The split with the strongest rise in the mean of ``loss`` and its z, or None."""
    n = len(loss)
    if n < 2 * min_segment:
        return None
    step = step or max(10, n // 200)
    splits = np.arange(min_segment, n - min_segment + 1, step)
    if len(splits) == 0:
        return None
    cum = np.concatenate([[0.0], np.cumsum(loss)])
    n1, n2 = splits.astype(np.float64), (n - splits).astype(np.float64)
    m1, m2 = cum[splits] / n1, (cum[n] - cum[splits]) / n2
    # The stream's variance under "no change" (for 0/1 rows: p (1 - p), the pooled two-proportion test).
    var = float(loss.var()) * (1 / n1 + 1 / n2)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(var > 0, (m2 - m1) / np.sqrt(var), 0.0)
    best = int(np.argmax(z))
    if not z[best] >= z_min:
        return None
    return int(splits[best]), float(z[best])


def find_change(correct: np.ndarray, *, min_segment: int = 50, z_min: float = 4.0,
                step: int | None = None) -> Change | None:
    """The strongest downward step in ``correct`` (1 = right, 0 = wrong, time order), or None.

    ``min_segment``: fewest rows on either side of a split; ``step``: the grid of candidate splits
    (default: about 200 candidates over the stream, never finer than 10 rows)."""
    c = np.asarray(correct, dtype=np.float64)
    found = _scan(1.0 - c, min_segment, z_min, step)
    if found is None:
        return None
    k, z = found
    return Change(index=k, rows_before=k, rows_after=len(c) - k, accuracy_before=float(c[:k].mean()),
                  accuracy_after=float(c[k:].mean()), z=z)


def find_loss_change(task: str, loss: np.ndarray, *, min_segment: int = 50, z_min: float = 4.0,
                     step: int | None = None) -> Change | None:
    """The strongest step up in a per-row loss stream (:meth:`monitor.tasks.Task.per_row_loss` of
    ``task``, time order), or None, in the task's headline figure (``Task.primary_metric``):
    :func:`find_change` on the 0/1 misclassification of a classifier (accuracy); the same scan on
    the (clipped) absolute errors of a regression model (the MAE)."""
    scan = _LOSS_SCANS[task_of(task).primary_metric]
    return scan(np.asarray(loss, dtype=np.float64), min_segment, z_min, step)


def _accuracy_change(values: np.ndarray, min_segment: int, z_min: float, step: int | None) -> Change | None:
    return find_change(1.0 - values, min_segment=min_segment, z_min=z_min, step=step)


def _error_change(values: np.ndarray, min_segment: int, z_min: float, step: int | None) -> Change | None:
    if len(values) < 2 * min_segment:
        return None
    clipped = np.minimum(values, np.quantile(values, CLIP_QUANTILE))
    found = _scan(clipped, min_segment, z_min, step)
    if found is None:
        return None
    k, z = found
    after = values[k:]
    return Change(index=k, rows_before=k, rows_after=len(values) - k, accuracy_before=None, accuracy_after=None,
                  z=z, mae_before=float(values[:k].mean()), mae_after=float(after.mean()),
                  mae_after_sd=float(after.std(ddof=1)) if len(after) > 1 else None)


#: The scan of a loss stream by the figure its change is read in (the task's primary metric).
_LOSS_SCANS: dict[str, Callable[[np.ndarray, int, float, int | None], Change | None]] = {
    "accuracy": _accuracy_change, "mae": _error_change}


def batch_boundary(ts: np.ndarray, index: int) -> int:
    """``index`` (a change's first row in time order) moved to the nearest start of a run of equal
    timestamps. Rows that share a timestamp (a client that stamps a whole batch once) cannot be
    told apart in time, so a step located a few rows into such a run starts at its nearer edge:
    otherwise a step located 5 rows before the end of the previous batch dates the change to that
    batch, and the retrain learns from a whole batch of the old concept (bench_outside
    ``delayed_labels``). Unique timestamps leave ``index`` unchanged."""
    t = np.asarray(ts)
    if not 0 < index < len(t) or t[index] != t[index - 1]:
        return index
    start = int(np.searchsorted(t, t[index], side="left"))
    end = int(np.searchsorted(t, t[index], side="right"))
    return end if end < len(t) and end - index < index - start else start


@dataclass(frozen=True)
class FastBreach:
    value: float             # the figure after the change: accuracy, or the MAE (metric "mae")
    bound: float             # its one-sided confidence bound on the bar's side: upper for accuracy, lower for MAE
    baseline: float
    drop: float              # worsening vs the baseline (point): baseline - accuracy, or the relative MAE rise
    rows_after: int
    metric: str = "accuracy"

    def describe(self) -> str:
        what, side = ("drop", "upper") if self.metric == "accuracy" else ("rise", "lower")
        return (f"{self.metric} {self.value:.4f} on the {self.rows_after} labelled rows since the change "
                f"vs baseline {self.baseline:.4f} ({what} {self.drop:.4f}; {side} bound {self.bound:.4f})")


def fast_breach(change: Change | None, baseline: float | None, drop: float, *, mode: str = "absolute",
                min_rows: int = 200, confidence: float = 0.99) -> FastBreach | None:
    """A breach the change point alone proves: ``min_rows`` rows after it and the one-sided upper
    bound of their accuracy at least ``drop`` below ``baseline`` (``drop`` relative to the baseline
    in ``mode="relative"``). For a regression change (:attr:`Change.metric` ``mae``) ``baseline`` is
    the baseline MAE and ``drop`` the relative rise (``alerts.mae_rise``): the one-sided lower bound
    of the MAE after the change must be at least ``baseline * (1 + drop)``. None otherwise."""
    if change is None or baseline is None or not math.isfinite(baseline) or change.rows_after < min_rows:
        return None
    if change.metric == "mae":
        return _fast_mae_breach(change, baseline, drop, confidence)
    assert change.accuracy_after is not None  # a classifier's change
    right = int(round(change.accuracy_after * change.rows_after))
    # A one-sided bound at `confidence` is the upper end of a two-sided interval at 2 * confidence - 1.
    interval = wilson_interval(right, change.rows_after, 2 * confidence - 1)
    if interval is None:
        return None
    upper = interval[1]
    limit = baseline - (drop * baseline if mode == "relative" else drop)
    if upper > limit + 1e-12:
        return None
    return FastBreach(change.accuracy_after, upper, baseline, baseline - change.accuracy_after, change.rows_after)


def _fast_mae_breach(change: Change, baseline: float, rise: float, confidence: float) -> FastBreach | None:
    if baseline <= 0 or change.mae_after is None or change.mae_after_sd is None:
        return None
    from scipy.stats import norm
    lower = change.mae_after - float(norm.ppf(confidence)) * change.mae_after_sd / math.sqrt(change.rows_after)
    if lower < baseline * (1 + rise) - 1e-12:
        return None
    return FastBreach(change.mae_after, lower, baseline, (change.mae_after - baseline) / baseline, change.rows_after,
                      metric="mae")
