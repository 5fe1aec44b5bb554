"""pandas DataFrames to API records (the format in docs/CONTRACTS.md).

A prediction frame has an ``id`` column, optional ``ts``, the model's outputs and the features:
either named, or every other column. The outputs follow the task (:mod:`monitor.tasks`), exactly
the columns the registered pyfunc returns, so ``features.join(model.predict(features))`` is a
prediction frame as it is:

* binary: the score column (P(1)) and an optional prediction column (0/1);
* multiclass: one ``proba_<class>`` column per class (or one ``probabilities`` column holding a
  list per row, in the order of the classes) and an optional prediction column (class names);
* regression: the prediction column (the predicted number).

An embedding feature (``embedding``: the names) is a column holding one vector per row (a list or
a 1-D array; None/NaN where missing, the frame contract): each is sent as float32 (what the store
keeps, so nothing is lost, and float32's shortest decimal form is half as long as float64's). An
``input_uri`` column is sent as each record's ``input_uri`` (where not missing); it is never a feature.

Values are handed over as they are, apart from what JSON cannot say: timestamps become epoch
seconds (naive ones are taken as UTC), missing values become ``null`` (so the server names them),
integer ids become strings. The server validates.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from monitor.embeddings import INPUT_URI
from monitor.errors import UserInputError
from monitor.tasks import PROBA_PREFIX, proba_column, task_of

_RESERVED = {"id", "ts", "label_ts", "model_version", INPUT_URI}
PROBABILITIES = "probabilities"   # a multiclass frame's list column: one probability per class, in class order


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
    if series.dtype == object or isinstance(series.dtype,
                                            pd.StringDtype) or pd.api.types.is_extension_array_dtype(series.dtype):
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


def _integral(frame: pd.DataFrame, name: str) -> list:
    """0/1 and class-id columns that pandas made float (a NaN somewhere, or arithmetic) go back to
    ints; class names and numbers that are not whole stay as they are."""
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
                       exclude: Sequence[str] = ("label",), categorical: Sequence[str] = (),
                       embedding: Sequence[str] = (), task: str = "binary",
                       classes: Sequence[str] | None = None) -> list[dict]:
    """``categorical``: feature columns sent as text (integer codes included); ``embedding``: feature
    columns of vectors, sent as float32 arrays. ``task`` and ``classes`` (the model's, from
    ``GET /v1/schema``) say which output columns to send."""
    outputs = _outputs(frame, task, classes, score, prediction)
    if features is None:
        skip = _RESERVED | {id, ts, score, prediction, PROBABILITIES, *exclude}
        features = [c for c in frame.columns if c not in skip and not str(c).startswith(PROBA_PREFIX)]
    missing = [f for f in features if f not in frame.columns]
    if missing:
        raise MissingColumn(f"the frame has no feature column(s) {missing}")
    names = [str(f) for f in features]
    ids = _ids(frame, id)
    text, vectors = set(categorical), set(embedding)
    columns = [_category_text(frame, f) if f in text else _vectors(frame, f) if f in vectors else _column(frame, f)
               for f in features]
    feature_rows = zip(*columns) if names else iter(lambda: (), None)
    records = [{"id": i, "features": dict(zip(names, row))} for i, row in zip(ids, feature_rows)]
    for key, values in outputs.items():
        for record, value in zip(records, values):
            record[key] = value
    _attach(records, frame, ts, "ts")
    _attach(records, frame, "model_version", "model_version")
    _attach(records, frame, INPUT_URI, INPUT_URI)
    output_columns = {"score": score, "prediction": prediction}
    for key in task_of(task).optional_outputs:  # a classifier's served class, when the frame has it
        if output_columns[key] in frame.columns:
            for record, value in zip(records, _integral(frame, output_columns[key])):
                if value is not None:
                    record[key] = value
    return records


def _outputs(frame: pd.DataFrame, task: str, classes: Sequence[str] | None, score: str,
             prediction: str) -> dict[str, list]:
    """The record keys of the model's outputs and their values per row (the prediction of a
    classifier, optional, is attached by the caller). Each output key read from the frame its own way."""
    kind = task_of(task)
    missing = {"score": f"the frame has no {score!r} score column (pass score=... to name it)",
               "prediction": f"the frame has no {prediction!r} column, the predicted value of a {kind} model "
                             "(pass prediction=... to name it)"}
    read = {"score": lambda: _required(frame, score, missing["score"]),
            "prediction": lambda: _required(frame, prediction, missing["prediction"]),
            PROBABILITIES: lambda: _probabilities(frame, classes)}
    return {kind.record_output: read[kind.record_output]()}


def _required(frame: pd.DataFrame, column: str, missing: str) -> list:
    """The values of ``column``; MissingColumn saying ``missing`` when the frame has none."""
    if column not in frame.columns:
        raise MissingColumn(missing)
    return _column(frame, column)


def _probabilities(frame: pd.DataFrame, classes: Sequence[str] | None) -> list:
    """Each row's class probabilities: ``{class: p}`` from the ``proba_<class>`` columns, or the
    list in the ``probabilities`` column."""
    found = [c for c in frame.columns if str(c).startswith(PROBA_PREFIX)]
    if classes:
        wanted = [proba_column(c) for c in classes]
        lacking = [c for c in wanted if c not in frame.columns]
        if lacking and len(lacking) < len(wanted):
            raise MissingColumn(f"the frame has no column(s) {lacking}: one proba_<class> column per class of "
                                f"{list(classes)}")
        found = [] if lacking else wanted
    if found:
        names = [str(c)[len(PROBA_PREFIX):] for c in found]
        return [dict(zip(names, row)) for row in zip(*(_column(frame, c) for c in found))]
    if PROBABILITIES in frame.columns:
        return [None if _missing_list(v) else [None if _missing(p) else float(p) for p in v]
                for v in frame[PROBABILITIES].tolist()]
    shown = ", ".join(proba_column(c) for c in (classes or ["<class>"])[:4])
    raise MissingColumn(f"the frame has neither proba_<class> columns ({shown}, ...) nor a {PROBABILITIES!r} "
                        "column (a list per row) with the class probabilities of a multiclass model")


def _vectors(frame: pd.DataFrame, name: str) -> list:
    """An embedding column: float32 1-D arrays (orjson writes them compactly), None where missing.
    A value that is not a vector of numbers goes as it is, for the server to name."""
    out: list = []
    for value in frame[name].tolist():
        if _missing_list(value):
            out.append(None)
            continue
        try:
            vector = np.asarray(value, dtype=np.float32)
        except (TypeError, ValueError):
            out.append(value)
            continue
        out.append(vector if vector.ndim == 1 else value)
    return out


def _missing_list(value: Any) -> bool:
    return not isinstance(value, (list, tuple, np.ndarray)) and _missing(value)


def label_records(frame: pd.DataFrame, *, id: str = "id", label: str = "label", ts: str = "ts") -> list[dict]:
    if label not in frame.columns:
        raise MissingColumn(f"the frame has no {label!r} label column (pass label=... to name it)")
    records = [{"id": i, "label": v} for i, v in zip(_ids(frame, id), _integral(frame, label))]
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
