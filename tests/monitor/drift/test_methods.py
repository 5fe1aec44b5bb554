"""Our mirror of Evidently's default method choice must agree with Evidently itself, since the
sampled run pins the method the full run would have picked."""
import typing

import numpy as np
import pandas as pd
import pytest
from evidently.legacy.calculations.stattests import get_stattest
from evidently.legacy.calculations.stattests.registry import get_registered_stattest
from evidently.legacy.core import ColumnType

from monitor.config import DriftConfig
from monitor.drift.methods import CATEGORICAL, NUMERIC, default_method, distinct_values, union_distinct

rng = np.random.default_rng(0)


def _cases():
    for n_ref in (50, 1000, 1001, 5000):
        yield n_ref, NUMERIC, pd.Series(rng.normal(size=n_ref)), pd.Series(rng.normal(size=300))
        for k in (1, 2, 3, 5, 6):
            vals = np.arange(k, dtype=float)
            yield n_ref, NUMERIC, pd.Series(rng.choice(vals, n_ref)), pd.Series(rng.choice(vals, 300))
        for k in (1, 2, 3, 7):
            cats = np.array([f"c{i}" for i in range(k)], dtype=object)
            yield n_ref, CATEGORICAL, pd.Series(rng.choice(cats, n_ref)), pd.Series(rng.choice(cats, 300))
    # The union counts: 2 values in the reference plus a third only in the current.
    yield 400, CATEGORICAL, pd.Series(["a", "b"] * 200, dtype=object), pd.Series(["a", "c"] * 50, dtype=object)
    yield 5000, NUMERIC, pd.Series([0.0, 1.0, 2.0] * 1666 + [0.0, 1.0]), pd.Series(np.arange(10.0))


@pytest.mark.parametrize("n_ref,kind,ref,cur", list(_cases()))
def test_default_method_mirrors_evidently(n_ref, kind, ref, cur):
    ctype = ColumnType.Numerical if kind == NUMERIC else ColumnType.Categorical
    evidently_choice = get_stattest(ref, cur, ctype, None).name
    ours = default_method(kind, len(ref), union_distinct(distinct_values(ref), cur))
    if ours is None:  # chi-square/z on a numeric column: Evidently's own choice, not pinnable by name
        assert evidently_choice in ("chisquare", "z") and kind == NUMERIC and n_ref <= 1000
    else:
        assert ours == evidently_choice


def test_distinct_values_caps_and_ignores_missing():
    assert distinct_values(pd.Series([1.0, np.nan, np.inf, 1.0, 2.0])) == frozenset({1.0, 2.0})
    assert distinct_values(pd.Series(np.arange(100.0))) is None
    assert distinct_values(pd.Series(["a", None, "b"], dtype=object)) == frozenset({"a", "b"})


@pytest.mark.parametrize("field,ctype", [("num_method", ColumnType.Numerical), ("cat_method", ColumnType.Categorical)])
def test_configurable_methods_exist_in_evidently_for_their_type(field, ctype):
    names = typing.get_args(typing.get_args(DriftConfig.model_fields[field].annotation)[0])
    assert names
    for name in names:
        get_registered_stattest(name, ctype)  # raises if unknown or not allowed for the type
