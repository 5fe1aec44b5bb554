"""Embedding features and raw-input references: how they are carried, once and for all.

Bottom layer (imports numpy and pandas only); every part consults these helpers.

An **embedding feature** (``{name, type: embedding, dim: N}``) is one fixed-length vector of floats
per row: an image or text model's penultimate-layer activations, a sentence encoder's output.

============  ===============================  ===================================================
where         form                              notes
============  ===============================  ===================================================
on the wire   a JSON list of ``dim`` numbers    in ``features`` like any feature; null = missing
stored        one BLOB column ``e_<name>``      ``dim`` little-endian float32 (4 bytes per value)
frames        an object column of 1-D           ``None`` where missing; :func:`matrix` gives the
              ``float32`` arrays                ``(rows, dim)`` block (NaN rows where missing)
============  ===============================  ===================================================

A prediction may also carry an **input reference** (:data:`INPUT_URI`): a path or object-store key
the model service already keeps for the raw input (an image file, a document). driftloop stores it
as text and hands it to the user's training code (``training.entrypoint``), which resolves it;
driftloop never fetches anything by itself. Window frames carry it as the column ``input_uri``
(``None`` where the sender gave none).
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import pandas as pd

INPUT_URI = "input_uri"        # the wire field, stored column and frame column of a raw-input reference
MAX_INPUT_URI_CHARS = 2048     # a path or key, not a payload
MAX_EMBEDDING_DIM = 4096
EMBEDDING_PREFIX = "e_"        # stored column of an embedding feature: e_<name>, float32 bytes
DTYPE = np.dtype("<f4")


def to_blob(vector: Iterable[float]) -> bytes:
    """One vector as stored: little-endian float32 bytes."""
    return np.asarray(vector, dtype=DTYPE).tobytes()


def from_blob(blob: bytes | memoryview | None, dim: int) -> np.ndarray | None:
    """A stored vector back as a read-only 1-D float32 array (None stays None)."""
    if blob is None:
        return None
    vec = np.frombuffer(blob, dtype=DTYPE)
    if len(vec) != dim:
        raise ValueError(f"stored embedding has {len(vec)} values, expected {dim}")
    return vec


def matrix(values: Any, dim: int) -> np.ndarray:
    """The ``(rows, dim)`` float32 block of an embedding column: a Series or list of vectors (arrays,
    lists or None), or already a 2-D array. Missing rows are all-NaN."""
    if isinstance(values, np.ndarray) and values.ndim == 2:
        if values.shape[1] != dim:
            raise ValueError(f"embedding block has {values.shape[1]} columns, expected {dim}")
        return values.astype(np.float32, copy=False)
    items = list(values.tolist() if isinstance(values, pd.Series) and values.dtype != object else values)
    out = np.full((len(items), dim), np.nan, dtype=np.float32)
    for i, v in enumerate(items):
        if v is None or (isinstance(v, float) and np.isnan(v)):
            continue
        row = np.asarray(v, dtype=np.float32)
        if row.shape != (dim,):
            raise ValueError(f"row {i}: embedding has shape {row.shape}, expected ({dim},)")
        out[i] = row
    return out


def column(block: np.ndarray, index: Any = None) -> pd.Series:
    """A frame column (object dtype, one float32 array per row) from a ``(rows, dim)`` block."""
    block = np.asarray(block, dtype=np.float32)
    values = np.empty(len(block), dtype=object)
    for i in range(len(block)):
        values[i] = None if np.isnan(block[i]).all() else block[i]
    return pd.Series(values, index=index, dtype=object)


def present(values: Any) -> np.ndarray:
    """Which rows of an embedding column hold a vector (bool array)."""
    return np.array([v is not None and not (isinstance(v, float) and np.isnan(v)) for v in values], dtype=bool)
