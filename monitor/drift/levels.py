"""A categorical column with many levels is tested on its most frequent ones (in the reference and
window samples together), the rest folded into one ``(other)`` level on both sides.

Two samples of one distribution over k categories are not at Jensen-Shannon distance 0: the plug-in
estimate's floor is about ``sqrt((k - 1) / 8 * (1/n1 + 1/n2))`` (and a chi-square over cells with a
handful of rows is no better). A merchant id of 400 levels read 0.14-0.36 on every check of a stream
that never changed (``bench/bench_outside.py high_card_ctrl``): drifted, always, at the default
threshold 0.1. So when reference and window together hold more levels than keeps that floor under
half the threshold (:func:`kept_levels`, never fewer than ``MIN_KEPT_LEVELS``), the most frequent
levels of the two samples together (each with ``MIN_LEVEL_ROWS`` rows or more) are kept and every other
value, on both sides, becomes :data:`OTHER`. A shift among the kept levels is tested as before;
new values show as levels of their own when frequent, and a shift towards rare ones as a larger
``(other)`` share. Missing values stay missing (:mod:`monitor.drift.missing` tests them).
The feature's drift ``details`` say so: the levels seen, the levels kept, and the ``(other)`` share
of each side.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

OTHER = "(other)"
MIN_KEPT_LEVELS = 20      # a column with at most this many levels is never folded
MIN_LEVEL_ROWS = 10       # a level kept apart has at least this many rows in the two samples together
NOISE_SHARE = 0.5         # the no-drift floor is kept under this share of the threshold
DEFAULT_THRESHOLD = 0.1   # Jensen-Shannon's, also for p-value methods (whose threshold is no distance)


@dataclass(frozen=True)
class Folded:
    """How one column was folded: what its drift ``details`` carry."""

    levels: int                  # distinct values of the reference and window samples together
    kept: int                    # of them, kept as they are (the most frequent of both samples)
    other_reference: float       # share of the reference sample's values folded into (other)
    other_current: float         # ... of the window sample's

    def to_dict(self) -> dict[str, Any]:
        return {"levels": self.levels, "kept_levels": self.kept, "other_level": OTHER,
                "reference_other_share": round(self.other_reference, 6),
                "current_other_share": round(self.other_current, 6)}


def kept_levels(reference_rows: int, current_rows: int, threshold: float | None = None) -> int:
    """The most levels (the folded one included) whose no-drift floor stays under ``NOISE_SHARE`` of
    a distance ``threshold`` at these sample sizes; at least ``MIN_KEPT_LEVELS``."""
    limit = NOISE_SHARE * (threshold if threshold and 0 < threshold < 1 else DEFAULT_THRESHOLD)
    inverse = 1.0 / max(reference_rows, 1) + 1.0 / max(current_rows, 1)
    return max(MIN_KEPT_LEVELS, int(1 + 8 * limit * limit / inverse))


def fold_levels(reference: pd.DataFrame, current: pd.DataFrame, columns: list[str],
                threshold: float | None = None) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Folded]]:
    """``reference`` and ``current`` (drift samples) with each of ``columns`` folded when it has more
    levels than :func:`kept_levels` allows (module docstring); the frames are copied only then."""
    folded: dict[str, Folded] = {}
    for c in columns:
        ref_values, cur_values = reference[c], current[c]
        ref_counts, cur_counts = ref_values.value_counts(dropna=True), cur_values.value_counts(dropna=True)
        both = ref_counts.add(cur_counts, fill_value=0)
        most = kept_levels(int(ref_counts.sum()), int(cur_counts.sum()), threshold)
        if len(both) <= most:
            continue
        # The most frequent levels of both samples together: chosen on one side's counts, the levels
        # that side over-represents by chance would be kept and read as a drop on the other (a
        # 100,000-level id read 0.09 so). A level with fewer than MIN_LEVEL_ROWS rows in both is
        # noise whichever side holds it. Ties broken by the value, so row order does not matter.
        order = sorted(((v, n) for v, n in both.items() if n >= MIN_LEVEL_ROWS), key=lambda kv: (-kv[1], str(kv[0])))
        # A real "(other)" value joins the folded ones rather than be mistaken for them.
        keep = {v for v, _ in order[:most - 1]} - {OTHER}
        if not folded:
            reference, current = reference.copy(), current.copy()
        ref_folded, ref_share = _fold(ref_values, keep)
        cur_folded, cur_share = _fold(cur_values, keep)
        reference[c], current[c] = ref_folded, cur_folded
        folded[c] = Folded(len(both), len(keep), ref_share, cur_share)
    return reference, current, folded


def _fold(values: pd.Series, keep: set) -> tuple[pd.Series, float]:
    present = values.notna()
    out = values.astype(object).where(~present | values.isin(keep), OTHER)
    share = float((present & (out == OTHER)).sum()) / max(int(present.sum()), 1)
    return out.where(present, None), share
