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


_ID_NAME = re.compile(r"id|ids|uuid|guid|identifier|idx|(.+_)(id|no|nr|num|number|key|uuid|guid|identifier|idx)"
                      r"|(.+_)?number")
# A DataFrame's index written with the frame: pandas' to_csv names it "Unnamed: 0"; reset_index
# "index" or "level_0".
_SAVED_INDEX = re.compile(r"unnamed_\d+|index|level_\d+")


def id_like_name(name: str) -> bool:
    """Whether ``name`` reads as a record id's: ``id``, ``PassengerId``, ``customerID``, ``identifier``,
    ``customer_number``, ``account_no``, ``RowNumber``, or a saved index's (``Unnamed: 0``, ``index``),
    not ``idle_minutes``, ``width``, ``number_of_kids``, ``price_index``."""
    return _ID_NAME.fullmatch(_snake(name)) is not None or saved_index_name(name)


def saved_index_name(name: str) -> bool:
    """Whether ``name`` is what pandas calls a frame's index written with it (``Unnamed: 0``, ``index``)."""
    return _SAVED_INDEX.fullmatch(_snake(name)) is not None


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
    # Named like an id first (a saved index after the others: PassengerId, not "Unnamed: 0"), then file order.
    for name in sorted(columns, key=lambda c: (not id_like_name(c), saved_index_name(c))):
        series = data[name]
        dtype = series.dtype
        if series.isna().any() or pd.api.types.is_bool_dtype(dtype) or not series.is_unique:
            continue
        named = id_like_name(name)
        if pd.api.types.is_integer_dtype(dtype):
            why = integer_id(name, series)
            if why:
                return ProposedId(name, why)
        elif named and not pd.api.types.is_numeric_dtype(dtype) and \
                bool(series.map(lambda v: isinstance(v, str)).all()):
            return ProposedId(name, "text, unique on every row, named like an id")
    return None


def integer_id(name: str, series: pd.Series) -> str | None:
    """Why the integer column ``name`` is a record id, not a feature (every later row brings a value
    training never saw, so it would drift for ever), or None: unique on every row of at least
    ``MIN_ROWS_FOR_ID_RULE``, and named like an id or counting up by one (a row number)."""
    if len(series) < MIN_ROWS_FOR_ID_RULE or not pd.api.types.is_integer_dtype(series.dtype) \
            or pd.api.types.is_bool_dtype(series.dtype) or series.isna().any() or not series.is_unique:
        return None
    if saved_index_name(name):
        return "integers, unique on every row, a saved DataFrame index by its name"
    if id_like_name(name):
        return "integers, unique on every row, named like an id"
    if bool((series.diff().iloc[1:] == 1).all()):
        return "integers, unique on every row, counting up by one (a row number)"
    return None
