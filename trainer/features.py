"""Reading a model's raw feature columns: numbers (nullable dtypes included, NaN where missing),
embedding vectors and categories as text, plus the reserved vocabulary entries (unknown, missing).

Like trainer/model.py, which re-exports every name here, this module imports only numpy and
pandas: it is pickled *by value* with the model (trainer/pyfunc.py), so serving needs no driftloop.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

UNKNOWN = 0  # index of the unknown bucket in every categorical vocabulary
# The vocabulary entry of a missing category. NUL never arrives as a category: ingestion refuses it.
MISSING = "\x00missing"


def numeric_values(df: pd.DataFrame, columns: Sequence[str]) -> np.ndarray:
    """float64 ``[n, len(columns)]``, NaN where missing: ints, floats, bools and nullable
    (``Int64``, ``boolean``, ``Float64``) columns alike. ValueError naming a non-numeric column."""
    out = np.empty((len(df), len(columns)), np.float64)
    for j, c in enumerate(columns):
        col = df[c]
        if isinstance(col.dtype, pd.CategoricalDtype):
            col = col.astype(object)
        try:
            out[:, j] = col.to_numpy(np.float64, na_value=np.nan)
        except (TypeError, ValueError):
            coerced = pd.to_numeric(col, errors="coerce")
            bad = coerced.isna() & col.notna()
            if bad.any():
                raise ValueError(f"feature {c!r} must be numeric; row {int(np.argmax(bad.to_numpy()))} holds "
                                 f"{col[bad].iloc[0]!r}") from None
            out[:, j] = coerced.to_numpy(np.float64, na_value=np.nan)
    return out


def embedding_values(column: pd.Series, dim: int) -> np.ndarray:
    """float32 ``[n, dim]`` of an embedding column (1-D arrays or lists, None/NaN where missing:
    all-NaN rows). ValueError naming the row of a vector of another length.
    (monitor.embeddings.matrix's rule, repeated: this module may import nothing of driftloop.)"""
    values = column.tolist()
    out = np.full((len(values), dim), np.nan, dtype=np.float32)
    for i, v in enumerate(values):
        if v is None or (isinstance(v, float) and v != v):
            continue
        row = np.asarray(v, dtype=np.float32)
        if row.shape != (dim,):
            raise ValueError(f"feature {column.name!r}: row {i} holds a vector of shape {row.shape}, expected ({dim},)")
        out[i] = row
    return out


def category_text(column: pd.Series) -> list[str | None]:
    """A categorical column as text, None where missing: integer codes (ints, and floats that hold
    whole numbers because pandas read a gap) as ``"3"``, not ``"3.0"``, so the file a model was
    trained on and the ints a service sends name the same category. monitor.records.frames keeps
    the client's copy of this rule: the client may not import torch, nor serving driftloop."""
    values = column.astype(object).tolist()
    return [None if v is None or v is pd.NA or (isinstance(v, float) and v != v)
            else str(int(v)) if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
            and float(v).is_integer() else str(v) for v in values]
