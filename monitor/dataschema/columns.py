"""One column of a user's file, judged alone: a feature (numeric, categorical, embedding), a column
left out (no values, constant, the raw input's reference) or a one-line problem naming it; and the
types the rest of :mod:`monitor.dataschema` shares (a feature, a column left out and why, a schema).

The rules are the package's (its docstring); :func:`infer_column` applies them to one column.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from enum import Enum

import numpy as np
import pandas as pd

from monitor.codes import written_as_codes
from monitor.config import FeatureSpec
from monitor.embeddings import INPUT_URI, MAX_EMBEDDING_DIM

FEW_VALUES = 10            # integer columns with at most this many values get a "codes?" comment
ID_LIKE_SHARE = 0.5        # text columns with more distinct values than this share of rows are refused
MIN_ROWS_FOR_ID_RULE = 20  # below this, every small table would look like ids
NUMERIC_SHARE = 0.95       # text columns with at least this share of numbers are numbers with bad values


@dataclass(frozen=True)
class InferredFeature:
    name: str
    type: str        # "numeric" | "categorical" | "embedding"
    note: str        # why, for a comment in driftloop.yaml
    dim: int | None = None  # embedding: the vectors' length

    def spec(self) -> FeatureSpec:
        return FeatureSpec(name=self.name, type=self.type, dim=self.dim)  # type: ignore[arg-type]


class Omission(str, Enum):
    """Why a column of the data is left out of the features."""
    EMPTY = "empty"                # no values
    CONSTANT = "constant"          # one value on every row
    MODEL_OUTPUT = "model_output"  # a model's prediction, score or probability (keep it with --keep)
    INPUT_REFERENCE = "input_reference"  # input_uri, or paths/URIs of the raw inputs (send as input_uri)
    RECORD_ID = "record_id"        # another id: unique integers named like one, or counting up (keep it with --keep)


@dataclass(frozen=True)
class LeftOut:
    """A column that is not a feature (no signal, or a model's output); ``why`` for the user."""
    name: str
    why: str
    kind: Omission = Omission.CONSTANT


@dataclass(frozen=True)
class InferredSchema:
    features: list[InferredFeature]
    left_out: list[LeftOut]
    kept_outputs: tuple[str, ...] = ()  # features that look like a model's outputs, kept as asked


def _values_note(series: pd.Series, limit: int = 5) -> str:
    values = sorted(map(str, series.dropna().unique()))
    shown = ", ".join(values[:limit]) + (", ..." if len(values) > limit else "")
    return f"{len(values)} value(s): {shown}"


_DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}([ T]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?"
                   r"|\d{1,2}[/.]\d{1,2}[/.]\d{2,4}( \d{1,2}:\d{2}(:\d{2})?)?")


def _all_dates(present: pd.Series) -> bool:
    """Text that is a date or timestamp on every row (ISO 8601, or day/month/year with / or .)."""
    if present.dtype != object and not isinstance(present.dtype, pd.StringDtype):
        return False
    return bool(present.map(lambda v: isinstance(v, str) and _DATE.fullmatch(v.strip()) is not None).all())


_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+|\.{0,2}/\S+|[A-Za-z]:\\\S+|(\S+/)+\S+\.[A-Za-z0-9]{1,5}")


def _vector_length(present: pd.Series) -> int | str | None:
    """The common length of a column of numeric vectors (lists or arrays: a Parquet list column),
    a problem naming how they differ, or None when the values are not vectors."""
    if present.dtype != object or not present.map(lambda v: isinstance(v, (list, tuple, np.ndarray))).all():
        return None
    lengths = present.map(len)
    if lengths.nunique() != 1:
        return f"vectors of {lengths.nunique()} different lengths ({lengths.min()}-{lengths.max()})"
    try:
        sample = np.asarray(present.iloc[:1000].tolist(), dtype=np.float64)
    except (TypeError, ValueError):
        return "lists of values that are not all numbers"
    if not np.isfinite(sample).all():
        return "vectors with NaN or infinite values"
    return int(lengths.iloc[0])


def _input_reference(name: str, present: pd.Series) -> LeftOut | None:
    if name == INPUT_URI:
        return LeftOut(name, "the raw input's reference (input_uri): stored with each prediction for your "
                             "training code, not a feature", Omission.INPUT_REFERENCE)
    text = present.iloc[:1000]
    if text.dtype == object and text.map(lambda v: isinstance(v, str) and _URI.fullmatch(v) is not None).all():
        return LeftOut(name, f"paths or URIs of raw inputs (e.g. {text.iloc[0]!r}), not a feature; a service "
                             f"sends them as input_uri", Omission.INPUT_REFERENCE)
    return None


def _numeric_except(name: str, present: pd.Series) -> str | None:
    """The problem of a column of numbers with a few values that are not (``12,5``, ``n.a.``): at least
    ``NUMERIC_SHARE`` of its values are numbers. Not a category, nor an id or free text: its bad
    values are named, with the first row, to be fixed. None otherwise, and for codes written with
    leading zeros (``01001``: text on purpose, read as such)."""
    if present.dtype != object and not isinstance(present.dtype, pd.StringDtype):
        return None
    text = present.astype(str).str.strip()
    if written_as_codes(text):
        return None
    numbers = pd.to_numeric(text, errors="coerce")
    bad = numbers.isna().to_numpy()
    if not bad.any() or bad.mean() > 1 - NUMERIC_SHARE:
        return None
    values = present[bad]
    examples = ", ".join(repr(v) for v in values.astype(str).unique()[:3])
    row = values.index.min() if pd.api.types.is_integer_dtype(values.index.dtype) else values.index[0]
    return (f"column {name!r} is numeric except {int(bad.sum())} of its {len(present)} values, such as {examples} "
            f"(first at row {row}): fix them in the data (an empty cell is a missing value), "
            f"or pass --ignore {shlex.quote(name)}")


def infer_column(name: str, series: pd.Series) -> InferredFeature | LeftOut | str:
    """The inferred feature, a column left out (no signal), or a one-line problem naming the column."""
    present = series.dropna()
    if len(present) == 0:
        return LeftOut(name, "no values (all missing)", Omission.EMPTY)
    reference = _input_reference(name, present)
    if reference is not None:
        return reference
    dim = _vector_length(present)
    if isinstance(dim, str):
        return f"column {name!r} holds lists, {dim}: an embedding is one fixed-length numeric vector per row"
    if dim is not None:
        if not 2 <= dim <= MAX_EMBEDDING_DIM:
            return f"column {name!r} holds vectors of {dim} values; an embedding has 2-{MAX_EMBEDDING_DIM}"
        gaps = f", {1 - len(present) / len(series):.0%} missing" if len(present) < len(series) else ""
        return InferredFeature(name, "embedding", f"vectors of {dim} numbers{gaps}", dim)
    if len(present) == len(series) and present.nunique() == 1:
        value = present.iloc[0]
        shown = repr(value) if isinstance(value, str) else str(value)
        return LeftOut(name, f"constant: {shown} on every row", Omission.CONSTANT)
    missing = f", {1 - len(present) / len(series):.0%} missing" if len(present) < len(series) else ""
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype) or (pd.api.types.is_object_dtype(dtype)
                                             and present.map(type).isin([bool]).all()):
        return InferredFeature(name, "numeric", f"boolean, used as 0/1{missing}")
    if pd.api.types.is_numeric_dtype(dtype):
        integer = pd.api.types.is_integer_dtype(dtype) or bool((present == present.round()).all())
        distinct = int(present.nunique())
        if integer and distinct <= FEW_VALUES:
            note = (f"integer, {_values_note(present)}{missing}; numeric keeps their order: "
                    "make it categorical if these are codes")
        else:
            note = f"{'integer' if integer else 'number'}, {distinct} distinct value(s){missing}"
        return InferredFeature(name, "numeric", note)
    if pd.api.types.is_datetime64_any_dtype(dtype) or _all_dates(present):
        return (f"column {name!r} holds dates or times: not a feature as it is (later rows bring values "
                f"never seen in training, so it would drift for ever); pass --ignore {shlex.quote(name)}, or derive "
                "features from it in your data (day of week, age in days)")
    text = present.astype(str)
    mostly_numbers = _numeric_except(name, present)
    if mostly_numbers:
        return mostly_numbers
    distinct = int(text.nunique())
    if len(text) >= MIN_ROWS_FOR_ID_RULE and distinct > ID_LIKE_SHARE * len(text):
        kind = "a different value on every sampled row" if distinct == len(text) else \
            f"{distinct} distinct values in {len(text)} rows"
        return (f"column {name!r} is text with {kind}: an id or free text, not a category; "
                f"pass --id {shlex.quote(name)} if it is the record id, or --ignore {shlex.quote(name)}")
    return InferredFeature(name, "categorical", f"text, {_values_note(text)}{missing}")
