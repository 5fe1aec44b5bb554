"""pandas DataFrames to API records (the format in docs/CONTRACTS.md).

A prediction frame has an ``id`` column, optional ``ts``, the score and optional prediction columns,
and the features: either named, or every other column. Values are handed over as they are, apart
from what JSON cannot say: timestamps become epoch seconds (naive ones are taken as UTC), missing
values become ``null`` (so the server names them), integer ids become strings. The server validates.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from monitor.errors import UserInputError

_RESERVED = {"id", "ts", "label_ts", "model_version"}


class MissingColumn(UserInputError, KeyError):
    """A column the records need is not in the frame. A KeyError, and a DriftloopError like every client error."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _column(frame: pd.DataFrame, name: str) -> list:
    series = frame[name]
    if isinstance(series.dtype, pd.CategoricalDtype):
        series = series.astype(object)
    if pd.api.types.is_bool_dtype(series.dtype):
        series = series.astype("Int64") if series.hasnans else series.astype(np.int64)
    if pd.api.types.is_datetime64_any_dtype(series.dtype):
        return _epoch_seconds(series)
    if series.dtype == object or isinstance(series.dtype, pd.StringDtype) or pd.api.types.is_extension_array_dtype(series.dtype):
        # read_csv leaves a boolean column with missing values as object (True/False/NaN): 0/1 on the
        # wire, like a bool column without them (the daemon takes booleans as 0/1 numeric features).
        return [None if _missing(v) else int(v) if isinstance(v, (bool, np.bool_)) else v
                for v in series.astype(object).tolist()]
    values = series.tolist()
    if series.hasnans:  # NaN -> None: "missing", which the server names (or derives, for prediction)
        values = [None if v != v else v for v in values]
    return values


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and value != value)


def _binary(frame: pd.DataFrame, name: str) -> list:
    """0/1 columns that pandas made float (a NaN somewhere, or arithmetic) go back to ints."""
    values = _column(frame, name)
    return [int(v) if isinstance(v, float) and v.is_integer() else v for v in values]


def _epoch_seconds(series: pd.Series) -> list:
    if series.dt.tz is None:
        series = series.dt.tz_localize("UTC")
    micros = series.dt.tz_convert("UTC").astype("datetime64[us, UTC]").astype("int64")
    seconds = (micros / 1_000_000).tolist()
    return [None if missing else s for s, missing in zip(seconds, series.isna().tolist())]


def _ids(frame: pd.DataFrame, column: str) -> list:
    if column not in frame.columns:
        raise MissingColumn(f"the frame has no {column!r} column (the caller-given record id)")
    series = frame[column]
    if pd.api.types.is_integer_dtype(series.dtype):
        return series.astype(str).tolist()
    return _column(frame, column)


def _category_text(frame: pd.DataFrame, name: str) -> list:
    """A categorical column as text for the wire: integer codes as ``"3"`` (not ``3``, which the
    server refuses, nor ``"3.0"``). The same rule as trainer.model.category_text, which the client
    may not import (torch); tests/monitor/ingest/test_client.py holds the two to it."""
    return [v if v is None or isinstance(v, str) else str(int(v))
            if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
            and float(v).is_integer() else str(v) for v in _column(frame, name)]


def prediction_records(frame: pd.DataFrame, *, features: Sequence[str] | None = None, id: str = "id",
                       ts: str = "ts", score: str = "score", prediction: str = "prediction",
                       exclude: Sequence[str] = ("label",), categorical: Sequence[str] = ()) -> list[dict]:
    """``categorical``: feature columns sent as text (integer codes included)."""
    if score not in frame.columns:
        raise MissingColumn(f"the frame has no {score!r} score column (pass score=... to name it)")
    if features is None:
        skip = _RESERVED | {id, ts, score, prediction, *exclude}
        features = [c for c in frame.columns if c not in skip]
    missing = [f for f in features if f not in frame.columns]
    if missing:
        raise MissingColumn(f"the frame has no feature column(s) {missing}")
    names = [str(f) for f in features]
    ids = _ids(frame, id)
    scores = _column(frame, score)
    text = set(categorical)
    columns = [_category_text(frame, f) if f in text else _column(frame, f) for f in features]
    feature_rows = zip(*columns) if names else iter(lambda: (), None)
    records = [{"id": i, "features": dict(zip(names, row)), "score": s}
               for i, row, s in zip(ids, feature_rows, scores)]
    _attach(records, frame, ts, "ts")
    _attach(records, frame, "model_version", "model_version")
    if prediction in frame.columns:
        for record, value in zip(records, _binary(frame, prediction)):
            if value is not None:
                record["prediction"] = value
    return records


def label_records(frame: pd.DataFrame, *, id: str = "id", label: str = "label", ts: str = "ts") -> list[dict]:
    if label not in frame.columns:
        raise MissingColumn(f"the frame has no {label!r} label column (pass label=... to name it)")
    records = [{"id": i, "label": v} for i, v in zip(_ids(frame, id), _binary(frame, label))]
    _attach(records, frame, ts, "ts")
    return records


def _attach(records: list[dict], frame: pd.DataFrame, column: str, key: str) -> None:
    if column not in frame.columns:
        return
    for record, value in zip(records, _column(frame, column)):
        if value is not None:
            record[key] = value


def with_model_version(records: list, version: str | int) -> list:
    """``records`` with ``model_version`` set where a record does not already say (a new list)."""
    return [r if not isinstance(r, dict) or r.get("model_version") is not None else {**r, "model_version": version}
            for r in records]
