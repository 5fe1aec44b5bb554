"""Window reads: predictions joined with their labels, into a typed pandas DataFrame.

Two readers return the same Arrow table, which :func:`to_frame` turns into the contract's frame:

* large windows of a SQLite file: child processes reading through ADBC (``sqlite_reader.py``);
* everything else (small windows, PostgreSQL, in-memory SQLite, no ADBC driver installed): the
  ordered query from :func:`build_query`, fetched through SQLAlchemy (:func:`read_generic`).
"""
from __future__ import annotations

import gc
import importlib.util
import logging
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy.engine import Connection

from monitor.config import ModelConfig
from monitor.embeddings import DTYPE, INPUT_URI
from monitor.records.fields import MAX_EPOCH_SECONDS, MAX_TS_TEXT
from monitor.store.schema import ModelTables, label_kind, proba_columns, stored_column
from monitor.tasks import internal_proba_columns

ADBC_AVAILABLE = importlib.util.find_spec("adbc_driver_sqlite") is not None  # found, deliberately not imported
log = logging.getLogger(__name__)
# Below this many rows the children's start-up (~0.2 s) costs more than fetching rows in-process.
CHILD_READER_MIN_ROWS = 50_000


@contextmanager
def gc_paused() -> Iterator[None]:
    """Creating a million string objects triggers full cyclic collections that find nothing to
    free (strings hold no references) and cost more than the conversion itself."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass(frozen=True)
class WindowQuery:
    sql: str  # with `?` placeholders
    params: tuple
    arrow_schema: pa.Schema


def select_list(model: ModelConfig, quote) -> str:
    """Columns of a window query over ``p`` (predictions) and ``l`` (labels), named as in :func:`arrow_schema`."""
    cols = ["p.id AS id", "p.ts AS ts"]
    cols += [f"p.{quote(stored_column(f))} AS c{i}" for i, f in enumerate(model.features)]
    cols += ["p.score AS score", "p.prediction AS prediction", "l.label AS label", "l.ts AS label_ts",
             "p.model_version AS model_version", f"p.{INPUT_URI} AS {INPUT_URI}", "p.seq AS seq"]
    cols += [f"p.{quote(c)} AS q{i}" for i, c in enumerate(proba_columns(model))]
    return ", ".join(cols)


def arrow_schema(model: ModelConfig) -> pa.Schema:
    fields = [pa.field("id", pa.string()), pa.field("ts", pa.int64())]
    kinds = {"numeric": pa.float64(), "categorical": pa.string(), "embedding": pa.binary()}
    fields += [pa.field(f"c{i}", kinds[f.type]) for i, f in enumerate(model.features)]
    numeric_label = label_kind(model) == "numeric"
    fields += [pa.field(name, pa.float64() if name == "score" or (name == "label" and numeric_label) else pa.int64())
               for name in ("score", "prediction", "label", "label_ts")]
    fields += [pa.field("model_version", pa.string()), pa.field(INPUT_URI, pa.string()), pa.field("seq", pa.int64())]
    fields += [pa.field(f"q{i}", pa.float64()) for i in range(len(proba_columns(model)))]
    return pa.schema(fields)


def build_query(tables: ModelTables, model: ModelConfig, quote, *, last_n: int | None = None,
                since_us: int | None = None, until_us: int | None = None,
                labelled_only: bool = False) -> WindowQuery:
    p, lab = quote(tables.predictions.name), quote(tables.labels.name)
    join = "JOIN" if labelled_only else "LEFT JOIN"
    where, params = [], []
    if since_us is not None:
        where.append("p.ts >= ?")
        params.append(since_us)
    if until_us is not None:
        where.append("p.ts < ?")
        params.append(until_us)
    sql = f"SELECT {select_list(model, quote)} FROM {p} p {join} {lab} l ON l.id = p.id"
    if where:
        sql += " WHERE " + " AND ".join(where)
    if last_n is None:
        sql += " ORDER BY p.ts, p.seq"
    else:
        # Newest N first through the (ts, seq) index, then back into time order.
        sql = f"SELECT * FROM ({sql} ORDER BY p.ts DESC, p.seq DESC LIMIT ?) w ORDER BY ts, seq"
        params.append(int(last_n))
    return WindowQuery(sql, tuple(params), arrow_schema(model))


def read_generic(conn: Connection, query: WindowQuery) -> pa.Table:
    sql = query.sql if conn.dialect.paramstyle == "qmark" else query.sql.replace("?", "%s")
    with gc_paused():
        rows = conn.exec_driver_sql(sql, query.params).all()
        columns = list(zip(*rows)) if rows else [()] * len(query.arrow_schema)
        del rows
        arrays = [pa.array(col, type=field.type) for col, field in zip(columns, query.arrow_schema)]
    return pa.Table.from_arrays(arrays, schema=query.arrow_schema)


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    arrays = []
    for field in schema:
        column = table.column(field.name)
        if column.type != field.type:
            column = pc.cast(column, field.type)  # only all-NULL columns come back mistyped
        arrays.append(column)
    return pa.Table.from_arrays(arrays, schema=schema)


def vectors(column: pa.ChunkedArray | pa.Array, dim: int) -> np.ndarray:
    """A binary column of stored embeddings -> an object array of 1-D float32 arrays (None where
    NULL). One ``np.frombuffer`` over the column's data buffer and one copy of the block, not a
    decode per row; the rows are views of that block."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not pa.types.is_binary(array.type):
        array = array.cast(pa.binary())
    n = len(array)
    out = np.empty(n, dtype=object)
    valid = np.ones(n, dtype=bool) if array.null_count == 0 else array.is_valid().to_numpy(zero_copy_only=False)
    if array.null_count:
        # A NULL may own bytes in the data buffer (the ADBC driver's do): rebuild without them.
        array = pc.drop_null(array)
    count = len(array)
    if count == 0:
        return out
    _, offsets_buffer, data = array.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32, count=count + 1, offset=array.offset * 4)
    lengths = np.diff(offsets)
    if not np.all(lengths == 4 * dim):
        k = int(np.argmax(lengths != 4 * dim))
        raise ValueError(f"stored embedding of row {int(np.flatnonzero(valid)[k])} has {int(lengths[k]) // 4} "
                         f"values, expected {dim}")
    block = np.frombuffer(data, dtype=DTYPE, count=count * dim, offset=int(offsets[0])).reshape(count, dim)
    block = block.astype(np.float32)  # a copy: the frame owns its memory, not the Arrow buffer
    positions = range(n) if count == n else np.flatnonzero(valid).tolist()
    for position, row in zip(positions, block):  # element-wise: numpy would broadcast a list of rows
        out[position] = row
    return out


# Stored times (microseconds) a window frame can hold: pandas' nanosecond timestamps end on
# 2262-04-11, and ingestion refuses times from that day on (monitor.records.fields.check_ts). A row
# stored before it did (or written around it) is left out of windows, not allowed to fail each read.
MIN_FRAME_US = -(2**63 - 1) // 1000 + 1  # pd.Timestamp.min, rounded up to a microsecond
MAX_FRAME_US = MAX_EPOCH_SECONDS * 1_000_000  # exclusive


def _out_of_range(column: pa.ChunkedArray) -> bool:
    low, high = pc.min_max(column).values()  # nulls skipped; both None when nothing is valid
    return low.is_valid and (low.as_py() < MIN_FRAME_US or high.as_py() >= MAX_FRAME_US)


def without_unrepresentable(table: pa.Table) -> pa.Table:
    """``table`` less the rows whose ``ts`` or ``label_ts`` lies outside what a pandas timestamp
    can hold (:data:`MIN_FRAME_US`, :data:`MAX_FRAME_US`), with a warning that says how many. Two
    min/max passes when every time is in range, as it is unless such a row was stored."""
    ts, label_ts = table.column("ts"), table.column("label_ts")
    if not (_out_of_range(ts) or _out_of_range(label_ts)):
        return table

    def inside(column: pa.ChunkedArray) -> pa.ChunkedArray:
        ok = pc.and_(pc.greater_equal(column, MIN_FRAME_US), pc.less(column, MAX_FRAME_US))
        return pc.fill_null(ok, True)  # no label: nothing to convert

    keep = pc.and_(inside(ts), inside(label_ts))
    dropped = len(table) - pc.sum(pc.cast(keep, pa.int64())).as_py()
    log.warning("window: left out %d stored row(s) whose ts or label ts is past %s or before 1677, beyond "
                "pandas' timestamps (stored before ingestion refused such times, or written around it; "
                "retention deletes them)", dropped, MAX_TS_TEXT)
    return table.filter(keep)


def to_frame(table: pa.Table, model: ModelConfig) -> pd.DataFrame:
    """The contract's window frame: id, ts, features, score, prediction, target, label_ts,
    model_version (None where the sender did not say), input_uri (likewise); by ts. An embedding
    feature is one object column of float32 arrays (:func:`vectors`), decoded from Arrow apart.
    One multithreaded Arrow conversion of the whole table: several times faster than column by
    column, which concatenates chunks and then copies again to consolidate pandas blocks."""
    micros_utc = pa.timestamp("us", tz="UTC")
    table = without_unrepresentable(table.drop_columns(["seq"]))
    for name in ("ts", "label_ts"):  # int64 microseconds -> timestamps: a reinterpretation
        table = table.set_column(table.schema.get_field_index(name), name, pc.cast(table.column(name), micros_utc))
    names = ["id", "ts", *model.feature_names, model.score, model.prediction, model.target, "label_ts", "model_version",
             INPUT_URI]
    names += internal_proba_columns(len(proba_columns(model)))
    table = table.rename_columns(names)
    # The served column the task reads (a regression model's predicted value is its score; the stored
    # prediction is unused): for a classifier, the prediction itself, a no-op.
    table = table.set_column(table.schema.get_field_index(model.prediction), model.prediction,
                             table.column(model.kind.served_column(model.score, model.prediction)))
    embedded = {f.name: vectors(table.column(f.name), f.dim or 0) for f in model.features if f.type == "embedding"}
    if embedded:
        table = table.drop_columns(list(embedded))
    with gc_paused():
        # The remaining int64 columns are prediction and target: nullable Int64. NULL text -> None,
        # NULL numbers -> NaN, NULL times -> NaT.
        frame = table.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get, coerce_temporal_nanoseconds=True)
    for name, values in embedded.items():
        frame.insert(names.index(name), name, pd.Series(values, index=frame.index, dtype=object))
    return frame
