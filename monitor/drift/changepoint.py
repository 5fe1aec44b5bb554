"""Where did performance change? A change-point scan of the labelled per-row error stream.

The window's labelled rows of one model version, in time order, give a 0/1 stream "was this
prediction right". A concept change shows up as a step down in that stream. :func:`find_change`
scans every candidate split (on a grid) with the two-proportion z statistic of "accuracy after
the split is lower than before" and keeps the strongest one; it is a change only when that
statistic clears ``z_min``, which is set high enough (default 4.0) that scanning many splits of a
stationary stream does not cross it by chance (the maximum of a Brownian bridge's scan exceeds 4
standard deviations with probability well under 1 %).

This is the offline counterpart of CUSUM / Page-Hinkley (a likelihood-ratio scan for one step in
a Bernoulli mean): it sees the whole window at once, so it needs no warm-up or tuning of a drift
rate, and it returns *where* the change happened, which is what retraining needs: rows after the
change are the new concept, rows before it are not.

:func:`fast_breach` is the "fast lane" in front of the windowed accuracy rule: it fires only when
the rows after the change are enough (``min_rows``) and their accuracy is, with ``confidence``
(one-sided Wilson bound), at least ``drop`` below the baseline. A change of 1.5 points never
satisfies a 3-point rule however many rows arrive; a collapse to coin-flipping does within a
couple of hundred rows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from monitor.stats import wilson_interval


@dataclass(frozen=True)
class Change:
    index: int               # first row after the change (position in the stream)
    rows_before: int
    rows_after: int
    accuracy_before: float
    accuracy_after: float
    z: float                 # the scan statistic at the chosen split

    def to_dict(self) -> dict:
        return {"index": self.index, "rows_before": self.rows_before, "rows_after": self.rows_after,
                "accuracy_before": self.accuracy_before, "accuracy_after": self.accuracy_after, "z": self.z}


def find_change(correct: np.ndarray, *, min_segment: int = 50, z_min: float = 4.0, step: int | None = None) -> Change | None:
    """The strongest downward step in ``correct`` (1 = right, 0 = wrong, time order), or None.

    ``min_segment``: fewest rows on either side of a split; ``step``: the grid of candidate splits
    (default: about 200 candidates over the stream, never finer than 10 rows)."""
    c = np.asarray(correct, dtype=np.float64)
    n = len(c)
    if n < 2 * min_segment:
        return None
    step = step or max(10, n // 200)
    splits = np.arange(min_segment, n - min_segment + 1, step)
    if len(splits) == 0:
        return None
    cum = np.concatenate([[0.0], np.cumsum(c)])
    right_before = cum[splits]
    right_after = cum[n] - right_before
    n1, n2 = splits.astype(np.float64), (n - splits).astype(np.float64)
    p1, p2 = right_before / n1, right_after / n2
    pooled = cum[n] / n
    var = pooled * (1 - pooled) * (1 / n1 + 1 / n2)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(var > 0, (p1 - p2) / np.sqrt(var), 0.0)
    best = int(np.argmax(z))
    if not z[best] >= z_min:
        return None
    k = int(splits[best])
    return Change(index=k, rows_before=k, rows_after=n - k, accuracy_before=float(p1[best]),
                  accuracy_after=float(p2[best]), z=float(z[best]))


@dataclass(frozen=True)
class FastBreach:
    accuracy_after: float
    upper_bound: float       # one-sided upper confidence bound of accuracy after the change
    baseline: float
    drop: float              # baseline - accuracy_after (point estimate)
    rows_after: int

    def describe(self) -> str:
        return (f"accuracy {self.accuracy_after:.4f} on the {self.rows_after} labelled rows since the change "
                f"vs baseline {self.baseline:.4f} (drop {self.drop:.4f}; upper bound {self.upper_bound:.4f})")


def fast_breach(change: Change | None, baseline: float | None, drop: float, *, mode: str = "absolute",
                min_rows: int = 200, confidence: float = 0.99) -> FastBreach | None:
    """A breach the change point alone proves: ``min_rows`` rows after it and the one-sided upper
    bound of their accuracy at least ``drop`` below ``baseline`` (``drop`` relative to the baseline
    in ``mode="relative"``). None otherwise."""
    if change is None or baseline is None or not math.isfinite(baseline) or change.rows_after < min_rows:
        return None
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
