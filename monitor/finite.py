"""Finite numbers, the one helper for them: metric values arrive as floats, numpy scalars, strings
from the database or JSON, None and NaN (ROC AUC of a one-class window), and what is stored, compared
or published is a finite float or nothing."""
from __future__ import annotations

import math
from typing import Any


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
