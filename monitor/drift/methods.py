"""Which Evidently stattest each column gets, decided on the *full* data.

Evidently picks a default method per column from the reference size and the number of distinct
values (``_get_default_stattest`` in ``evidently/legacy/calculations/stattests/registry.py``):

=========================  ===========================================  =====================
reference rows (non-NA)    numeric                                      categorical
=========================  ===========================================  =====================
<= 1000                    ``ks`` (> 5 values); chi-square / z (<= 5)    chi-square (> 2), z
> 1000                     ``wasserstein`` (> 5 values); JS (<= 5)       ``jensenshannon``
=========================  ===========================================  =====================

We hand Evidently *samples*, so left alone it would decide on the sample's size and distinct
values. To keep the verdicts of the full run we decide here, on the full data, and pin that
method per column (``tests/monitor/drift/test_methods.py`` checks this mirror against Evidently's
own choice). The one case that cannot be pinned by name is chi-square/z on a numeric column
with few values and a small reference (Evidently registers those tests for categorical columns
only); :func:`default_method` returns None there, and ``monitor.drift.evaluate`` pins the
registered ``chisquare_two_sample`` for 3 to 5 values (as for categories, whose ``chisquare`` takes
the small reference's frequencies as exact) and leaves the z-test of 2 values to Evidently.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

NUMERIC, CATEGORICAL = "numeric", "categorical"
SMALL_REFERENCE = 1000     # Evidently: reference rows at or below this get p-value tests
FEW_VALUES_NUMERIC = 5     # numeric columns with at most this many distinct values count as discrete
FEW_VALUES_BINARY = 2

# Default thresholds of the methods Evidently picks by default (StatTest.default_threshold).
DEFAULT_THRESHOLDS = {"wasserstein": 0.1, "jensenshannon": 0.1, "ks": 0.05, "chisquare": 0.05, "z": 0.05,
                      "chisquare_two_sample": 0.05}


def default_method(kind: str, reference_count: int, distinct: int) -> str | None:
    """The stattest name Evidently 0.7 picks for a column; None where it cannot be pinned by name.

    ``distinct`` is the number of distinct non-missing values in reference and current together
    (only whether it is <= 2, <= 5 or more matters, so callers may cap it at 6)."""
    if reference_count <= SMALL_REFERENCE:
        if kind == NUMERIC:
            return "ks" if distinct > FEW_VALUES_NUMERIC else None
        return "chisquare" if distinct > FEW_VALUES_BINARY else "z"
    if kind == NUMERIC:
        return "wasserstein" if distinct > FEW_VALUES_NUMERIC else "jensenshannon"
    return "jensenshannon"


def clean(values: pd.Series) -> pd.Series:
    """The values Evidently tests: infinities count as missing, missing values are dropped."""
    if pd.api.types.is_float_dtype(values.dtype):
        arr = values.to_numpy()
        return values[np.isfinite(arr)]
    return values.dropna()


CAP = FEW_VALUES_NUMERIC + 1


def distinct_values(values: pd.Series, cap: int = CAP) -> frozenset | None:
    """The distinct non-missing values when there are fewer than ``cap``, else None (= many).

    Looks at a prefix first: continuous columns show ``cap`` values within a few rows, so the
    common case never scans a million-row column."""
    head = clean(values.iloc[:2048])
    if head.nunique() >= cap:
        return None
    uniq = pd.unique(clean(values))
    return None if len(uniq) >= cap else frozenset(uniq.tolist())


def union_distinct(reference: frozenset | None, current: pd.Series, cap: int = CAP) -> int:
    """Distinct values of reference and current together, capped at ``cap``."""
    if reference is None:
        return cap
    cur = distinct_values(current, cap)
    if cur is None:
        return cap
    return min(len(reference | cur), cap)
