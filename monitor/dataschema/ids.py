"""The record id: the column ``driftloop init`` takes as the id when none is given (the rules are
in :mod:`monitor.dataschema`'s docstring)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from monitor.dataschema.columns import MIN_ROWS_FOR_ID_RULE

def _snake(name: str) -> str:
    """``PassengerId`` -> ``passenger_id``, ``customerID`` -> ``customer_id``, ``Row Number`` -> ``row_number``."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name.strip())
    return re.sub(r"[^a-z0-9]+", "_", spaced.lower()).strip("_")


_ID_NAME = re.compile(r"id|ids|uuid|guid|(.+_)(id|no|nr|num|number|key|uuid|guid)|(.+_)?number")


def id_like_name(name: str) -> bool:
    """Whether ``name`` reads as a record id's: ``id``, ``PassengerId``, ``customerID``,
    ``customer_number``, ``account_no``, ``RowNumber`` (not ``idle_minutes``, ``width``, ``number_of_kids``)."""
    return _ID_NAME.fullmatch(_snake(name)) is not None


@dataclass(frozen=True)
class ProposedId:
    name: str
    why: str  # for the user: what made init take it


def propose_id(data: pd.DataFrame, skip: Sequence[str] = ()) -> ProposedId | None:
    """The column of ``data`` (not in ``skip``) that is the record id by the rules in
    :mod:`monitor.dataschema`'s docstring, or None. Columns named like an id come first, then file order."""
    if len(data) < MIN_ROWS_FOR_ID_RULE:
        return None
    columns = [str(c) for c in data.columns if str(c) not in skip]
    for name in sorted(columns, key=lambda c: not id_like_name(c)):
        series = data[name]
        dtype = series.dtype
        if series.isna().any() or pd.api.types.is_bool_dtype(dtype) or not series.is_unique:
            continue
        named = id_like_name(name)
        if pd.api.types.is_integer_dtype(dtype):
            counting = bool((series.diff().iloc[1:] == 1).all())
            if named or counting:
                what = "named like an id" if named else "counting up by one (a row number)"
                return ProposedId(name, f"integers, unique on every row, {what}")
        elif named and not pd.api.types.is_numeric_dtype(dtype) and \
                bool(series.map(lambda v: isinstance(v, str)).all()):
            return ProposedId(name, "text, unique on every row, named like an id")
    return None
