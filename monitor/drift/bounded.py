"""Stored numbers as a check reads them: within float32's range, so no value can make a check fail.

Ingestion refuses numbers beyond ``model.max_abs_value`` (float32's range by default), but rows
stored before that rule, a reference sample from the user's own files or a configured wider limit
can still hold a finite ``1e308``. Three such rows made every check of the window fail: the
standard deviation behind a histogram's bins overflowed to infinity and Evidently's drift test
ended in "cannot convert float NaN to integer"; a label of ``1e-310`` made the reciprocal of
Evidently's MAPE baseline infinite. So each float column of a window and a reference is read as
float32 would hold it, without rounding what fits:

* a magnitude beyond float32's largest finite number (3.4e38, infinities included) is saturated
  to it, sign kept: it still counts, as far out as float32 goes, in every test and error;
* a magnitude below float32's smallest normal number (1.2e-38, float64 denormals included) is 0;
* everything else, and every missing value, is untouched (the frame is not even copied).

Within these bounds every float64 statistic of a check stays finite (:mod:`monitor.finite`). A
value far outside the reference's spread is not clipped further: it is a real observation, which a
drift test or an error figure should see, and the statistics stay finite at any distance.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from monitor.finite import FLOAT32_MAX, FLOAT32_TINY


def float32_bounded(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each float column's out-of-range values replaced (module docstring); the same
    object when none is out of range."""
    out = frame
    for name in frame.columns:
        column = frame[name]
        if not pd.api.types.is_float_dtype(column.dtype):
            continue
        values = column.to_numpy(dtype=np.float64, na_value=np.nan)
        fixed = bounded_values(values)
        if fixed is values:
            continue
        if out is frame:
            out = frame.copy()
        out[name] = fixed if isinstance(column.dtype, np.dtype) else pd.array(fixed, dtype=column.dtype)
    return out


def bounded_values(values: np.ndarray) -> np.ndarray:
    """A float64 array with its out-of-range values replaced; the same array when none is."""
    with np.errstate(invalid="ignore"):  # NaN: a missing value, compares False and stays
        size = np.abs(values)
        huge = size > FLOAT32_MAX
        tiny = (size < FLOAT32_TINY) & (size > 0.0)
    if not (huge.any() or tiny.any()):
        return values
    out = np.where(huge, np.copysign(FLOAT32_MAX, values), values)
    out[tiny] = 0.0
    return out


# Bins a histogram of a column must be able to hold: Evidently draws 10 per side for its report and
# picks Doane's number (tens) for the drift tests that bin; 1,024 leaves room for both.
_BINS = 1024
# How far from the reference's centre, in its spreads, a value is kept when a column must be rescaled.
_SPREADS = 1e6


# Evidently's normed Wasserstein distance divides by the reference's standard deviation floored at
# 0.001 (``max(std, 0.001)``): below that a column's drift reads in the floor's units, so a feature
# of spread 1e-10 moved ten thousand spreads read 0.0005 against the 0.1 threshold.
EVIDENTLY_STD_FLOOR = 1e-3


def binnable(reference: pd.DataFrame | None, current: pd.DataFrame,
             groups: list[list[str]], *, std_floor: float = 0.0) -> tuple[pd.DataFrame | None, pd.DataFrame]:
    """The two frames Evidently bins, with each group of float columns (columns in the same units:
    a regression's target and prediction) that numpy could not bin rescaled; the same objects when
    none needs it.

    numpy splits a column's range into equal bins and refuses ("Too many bins for data range")
    when the edges do not increase: a constant column at 1e16 (its range widened by ±0.5 is still
    one number) or values 1e16 apart by less than their float spacing. Any stored value can do that,
    so a group that would is rescaled, on both sides alike, to spreads of the reference around its
    median, kept within 1e6 spreads: the distance tests compare shapes, which that keeps, and a value
    a million spreads out is as far out as a test can tell.

    ``std_floor``: a group whose reference varies, but with a standard deviation under it, is
    rescaled the same way (:data:`EVIDENTLY_STD_FLOOR` for the drift tests: a tiny-scale feature
    read blind)."""
    for group in groups:
        frames = [f for f in (reference, current) if f is not None]
        base = reference if reference is not None else current
        pooled = np.concatenate([base[c].to_numpy(dtype=np.float64, na_value=np.nan) for c in group])
        if (all(_can_bin(f[c].to_numpy(dtype=np.float64, na_value=np.nan)) for f in frames for c in group)
                and not _below_floor(pooled, std_floor)):
            continue
        centre, spread = _centre_and_spread(pooled[np.isfinite(pooled)])
        reference = None if reference is None else _rescaled(reference, group, centre, spread)
        current = _rescaled(current, group, centre, spread)
    return reference, current


def _below_floor(values: np.ndarray, floor: float) -> bool:
    """Whether ``values`` vary, but by a standard deviation under ``floor``."""
    if floor <= 0.0:
        return False
    values = values[np.isfinite(values)]
    if len(values) < 2:
        return False
    std = float(values.std())
    return 0.0 < std < floor


def _can_bin(values: np.ndarray) -> bool:
    values = values[np.isfinite(values)]
    if not len(values):
        return True
    low, high = float(values.min()), float(values.max())
    if low == high:  # numpy's own widening of an empty range
        low, high = low - 0.5, high + 0.5
    width = (high - low) / _BINS
    return bool(np.isfinite(width) and width > 4 * np.spacing(max(abs(low), abs(high))))


def _centre_and_spread(values: np.ndarray) -> tuple[float, float]:
    if not len(values):
        return 0.0, 1.0
    centre = float(np.median(values))
    q1, q3 = np.percentile(values, [25, 75])
    spread = float(q3 - q1) / 1.349 or float(values.std())  # a normal's sigma from its quartiles
    return centre, spread if np.isfinite(spread) and spread > 0 else 1.0


def _rescaled(frame: pd.DataFrame, columns: list[str], centre: float, spread: float) -> pd.DataFrame:
    out = frame.copy()
    for c in columns:
        scaled = (frame[c].to_numpy(dtype=np.float64, na_value=np.nan) - centre) / spread
        out[c] = np.clip(scaled, -_SPREADS, _SPREADS)
    return out


def float_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if pd.api.types.is_float_dtype(frame[c].dtype)]
