"""Finite numbers, the one helper for them: metric values arrive as floats, numpy scalars, strings
from the database or JSON, None and NaN (ROC AUC of a one-class window), and what is stored, compared
or published is a finite float or nothing."""
from __future__ import annotations

import math
from typing import Any

# float32's largest finite number and smallest normal one. Ingestion refuses numbers beyond the first
# (model.max_abs_value) and a check reads stored values within both (monitor.drift.bounded): inside
# them, float64 statistics cannot overflow (a square is at most 1.2e77, a fourth power 1.3e154) and
# a reciprocal such as a percentage error's 1 / y cannot either.
FLOAT32_MAX = 3.4028234663852886e38
FLOAT32_TINY = 1.1754943508222875e-38


def finite(x: Any) -> float | None:
    """``x`` as a finite float, or None (missing, NaN, infinite, or not a number at all)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def is_finite(x: Any) -> bool:
    """Whether ``x`` is a finite number (None, NaN and infinities are not)."""
    return finite(x) is not None
