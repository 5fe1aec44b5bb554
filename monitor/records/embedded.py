"""Embedding features and input references on the validation hot path, a whole column at a time.

A column of embedding values (one per record, as parsed from JSON) is checked with a few C-level
passes and one numpy conversion instead of a Python loop over ``rows x dim`` numbers:

* every value a list (or null), every list ``dim`` long (``set(map(len, ...))``);
* every element an int or a float: ``set(map(type, chain(...)))``. numpy alone would not do:
  ``np.array([1.0, "2"], float)`` parses the string and ``[1.0, true]`` turns the boolean into 1.0;
* one ``np.array(..., float32)`` of the block and ``isfinite`` on it (NaN cannot come from JSON;
  a number beyond float32's range becomes inf here and is refused);
* one ``tobytes`` per row: the stored form (:func:`monitor.embeddings.to_blob`).

Anything off returns None and the precise path (:func:`monitor.records.fields.check_embedding`,
record by record) names the record, the feature and what was expected. Both give the same bytes.
bench/bench_ingest.py ``--embedding-dim`` measures the cost against the same rows as numbers.
"""
from __future__ import annotations

from itertools import chain
from typing import Any

import numpy as np

from monitor.embeddings import DTYPE, MAX_INPUT_URI_CHARS
from monitor.records.fastpath import clean_text

_NUMBER = frozenset({int, float})
_VECTOR_KINDS = frozenset({list, np.ndarray, type(None)})


def fast_column(values: list, dim: int) -> list[bytes | None] | None:
    """The stored form of a column of embedding values, or None when any value needs the precise path."""
    kinds = set(map(type, values))
    if not kinds <= _VECTOR_KINDS:
        return None
    present = values if type(None) not in kinds else [v for v in values if v is not None]
    if not present:
        return [None] * len(values)
    if set(map(len, present)) != {dim}:
        return None
    if np.ndarray in kinds:  # Python callers (a DataFrame's column of arrays): 1-D arrays of numbers
        if not all(v.ndim == 1 and v.dtype.kind in "fiu" for v in present if type(v) is np.ndarray):
            return None
        lists = [v for v in present if type(v) is list]
    else:
        lists = present
    if not set(map(type, chain.from_iterable(lists))) <= _NUMBER:
        return None
    try:
        with np.errstate(over="ignore"):  # beyond float32's range: inf, refused below
            block = np.array(present, dtype=DTYPE)
    except (OverflowError, ValueError):  # an int too large for a float
        return None
    if not np.isfinite(block).all():
        return None
    blobs: Any = [row.tobytes() for row in block]
    if len(present) == len(values):
        return blobs
    it = iter(blobs)
    return [None if v is None else next(it) for v in values]


def fast_uris(values: list) -> list | None:
    """A column of ``input_uri`` values (None where not given) as they are, or None when any needs
    the precise path (:func:`monitor.records.fields.check_input_uri`)."""
    kinds = set(map(type, values))
    if kinds == {type(None)}:
        return values
    if not kinds <= {str, type(None)}:
        return None
    texts = [v for v in values if v is not None]
    lengths = list(map(len, texts))
    if min(lengths) < 1 or max(lengths) > MAX_INPUT_URI_CHARS:
        return None
    return values if clean_text(texts) else None

