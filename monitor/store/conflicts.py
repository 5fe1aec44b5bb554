"""Re-sent ids: the same content is a duplicate, different content a conflict that refuses the batch.

Called inside the write transaction when fewer rows were inserted than sent. Fields the sender left
to the server (``ts``, ``prediction``, ``model_version``, ``input_uri``) are not compared, nor are
features that were added to the model after the row was stored (NULL there): there is nothing to
contradict.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from itertools import repeat
from typing import Any

from sqlalchemy.engine import Connection

from monitor.config import ModelConfig
from monitor.errors import ConflictError
from monitor.records.batches import LabelBatch, PredictionBatch
from monitor.records.fields import describe
from monitor.store.engine import driver_sql
from monitor.embeddings import INPUT_URI
from monitor.store.schema import ModelTables, stored_column

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ID_CHUNK = 900  # ids per IN (...) lookup: far below SQLite's and PostgreSQL's parameter limits
MAX_LISTED = 50


def check_predictions(conn: Connection, tables: ModelTables, model: ModelConfig, batch: PredictionBatch) -> None:
    columns = ["ts", *(stored_column(f) for f in model.features), "score", "prediction", "model_version", INPUT_URI]
    stored = rows_by_id(conn, tables.predictions.name, columns, batch.ids)
    fields = ["ts", *(f"features.{f.name}" for f in model.features), "score", "prediction", "model_version", INPUT_URI]
    uris = batch.input_uris or [None] * len(batch)
    found = []
    for i, rid in enumerate(batch.ids):
        old = stored.get(rid)
        if old is None:  # deleted meanwhile (retention); nothing left to contradict
            continue
        new = [batch.ts[i], *(col[i] for col in batch.features), batch.scores[i], batch.predictions[i],
               batch.model_versions[i], uris[i]]
        compare = [batch.ts_given[i], *repeat(True, len(batch.features)), True, batch.prediction_given[i],
                   batch.model_versions[i] is not None, uris[i] is not None]
        for field, was, now, check in zip(fields, old, new, compare):
            if isinstance(was, memoryview):  # BYTEA through some drivers
                was = bytes(was)
            if check and was is not None and was != now:
                found.append(_conflict(batch.position(i), rid, field, was, now))
                break
    _raise(found, "prediction")


def check_labels(conn: Connection, tables: ModelTables, batch: LabelBatch) -> None:
    stored = rows_by_id(conn, tables.labels.name, ["label", "ts"], batch.ids)
    found = []
    for i, rid in enumerate(batch.ids):
        if rid not in stored:
            continue
        label, ts = stored[rid]
        if label != batch.labels[i]:
            found.append(_conflict(batch.position(i), rid, "label", label, batch.labels[i]))
        elif batch.ts_given[i] and ts != batch.ts[i]:
            found.append(_conflict(batch.position(i), rid, "ts", ts, batch.ts[i]))
    _raise(found, "label")


def rows_by_id(conn: Connection, table: str, columns: list[str], ids: list[str]) -> dict[str, tuple]:
    quote = conn.dialect.identifier_preparer.quote
    select = ", ".join(quote(c) for c in ["id", *columns])
    out: dict[str, tuple] = {}
    for start in range(0, len(ids), _ID_CHUNK):
        chunk = ids[start:start + _ID_CHUNK]
        sql = f"SELECT {select} FROM {quote(table)} WHERE id IN ({', '.join('?' * len(chunk))})"
        for row in conn.exec_driver_sql(driver_sql(conn, sql), tuple(chunk)).all():
            out[row[0]] = tuple(row[1:])
    return out


def _raise(found: list[dict], kind: str) -> None:
    if found:
        ids = ", ".join(repr(c["id"]) for c in found[:5]) + (", ..." if len(found) > 5 else "")
        raise ConflictError(f"{len(found)} {kind} id(s) already stored with different content ({ids}); "
                            "nothing from this batch was stored", found[:MAX_LISTED])


def _conflict(index: int, rid: str, field: str, stored: Any, new: Any) -> dict:
    if field == "ts":
        stored, new = _iso(stored), _iso(new)
    if isinstance(stored, bytes):  # an embedding: say so rather than print kilobytes
        return {"index": index, "id": rid, "field": field,
                "message": f"id {rid!r} is already stored with another {field} vector (an embedding of "
                           f"{len(stored) // 4} values); this record's differs"}
    return {"index": index, "id": rid, "field": field,
            "message": f"id {rid!r} is already stored with {field} = {describe(stored)}; this record has "
                       f"{describe(new)}"}


def _iso(micros: int) -> str:
    return (_EPOCH + timedelta(microseconds=int(micros))).isoformat().replace("+00:00", "Z")
