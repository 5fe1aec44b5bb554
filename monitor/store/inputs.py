"""What callers hand the store, in the form it stores: records (a validated batch, a list of API
records, or a DataFrame with the model's columns) as validated batches and the rows inserted; the
``since``/``until`` bounds of a read (datetime or epoch seconds) as epoch microseconds."""
from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from itertools import repeat
from typing import Any, Iterator

import pandas as pd

from monitor.config import ModelConfig
from monitor.errors import ValidationError
from monitor.records import frames
from monitor.records.validation import LabelBatch, PredictionBatch, RecordValidator

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _id_column(frame: pd.DataFrame, model: ModelConfig) -> str:
    """A frame's record ids: in ``model.id`` (e.g. customer_id) when it has that column, else ``id``."""
    return model.id if model.id in frame.columns else "id"


def prediction_batch(validator: RecordValidator, model: ModelConfig, records: Any,
                     model_version: str | int | None = None) -> PredictionBatch:
    if isinstance(records, PredictionBatch):
        return records
    if isinstance(records, pd.DataFrame):
        m = model
        with _frame_errors():
            records = frames.prediction_records(records, features=m.feature_names, score=m.score,
                                                prediction=m.prediction, id=_id_column(records, m),
                                                embedding=m.embedding_features, task=m.task, classes=m.classes)
    if model_version is not None:
        records = frames.with_model_version(records, model_version)
    return validator.predictions(records)


def label_batch(validator: RecordValidator, model: ModelConfig, records: Any) -> LabelBatch:
    if isinstance(records, LabelBatch):
        return records
    if isinstance(records, pd.DataFrame):
        with _frame_errors():
            records = frames.label_records(records, label=model.target, id=_id_column(records, model))
    return validator.labels(records)


def prediction_rows(batch: PredictionBatch, now_us: int, assumed_version: str | None) -> list[tuple]:
    """The rows of the predictions table, in the store's column order (see PredictionStore)."""
    n = len(batch)
    versions = batch.model_versions if assumed_version is None else \
        [assumed_version if v is None else v for v in batch.model_versions]
    uris = repeat(None, n) if batch.input_uris is None else batch.input_uris
    return list(zip(batch.ids, batch.ts, *batch.features, batch.scores, batch.predictions, repeat(now_us, n),
                    versions, *(batch.probas or ()), uris))


def label_rows(batch: LabelBatch, now_us: int) -> list[tuple]:
    return list(zip(batch.ids, batch.labels, batch.ts, repeat(now_us, len(batch))))


@contextmanager
def _frame_errors() -> Iterator[None]:
    try:
        yield
    except KeyError as exc:  # a column the model needs is not in the frame
        message = str(exc.args[0]) if exc.args else str(exc)
        raise ValidationError(message, [{"index": None, "field": "(frame)", "message": message}]) from None


def micros(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, datetime):  # includes pandas.Timestamp
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return (value - EPOCH) // timedelta(microseconds=1)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return round(value * 1_000_000)
    raise ValueError(f"{name} must be a datetime or epoch seconds, got {value!r}")
