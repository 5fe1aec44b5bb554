"""Window reads: predictions joined with their labels, into a typed pandas DataFrame.

Two readers return the same Arrow table, which :func:`to_frame` turns into the contract's frame:

* large windows of a SQLite file: child processes reading through ADBC (``sqlite_reader.py``);
* everything else (small windows, PostgreSQL, in-memory SQLite, no ADBC driver installed): the
  ordered query from :func:`build_query`, fetched through SQLAlchemy (:func:`read_generic`).
"""
from __future__ import annotations

import gc
import importlib.util
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy.engine import Connection

from monitor.config import ModelConfig
from monitor.store.schema import FEATURE_PREFIX, ModelTables, label_kind, proba_columns
from monitor.tasks import internal_proba_columns

ADBC_AVAILABLE = importlib.util.find_spec("adbc_driver_sqlite") is not None  # found, deliberately not imported
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
    cols += [f"p.{quote(FEATURE_PREFIX + f.name)} AS c{i}" for i, f in enumerate(model.features)]
    cols += ["p.score AS score", "p.prediction AS prediction", "l.label AS label", "l.ts AS label_ts",
             "p.model_version AS model_version", "p.seq AS seq"]
    cols += [f"p.{quote(c)} AS q{i}" for i, c in enumerate(proba_columns(model))]
    return ", ".join(cols)


def arrow_schema(model: ModelConfig) -> pa.Schema:
    fields = [pa.field("id", pa.string()), pa.field("ts", pa.int64())]
    fields += [pa.field(f"c{i}", pa.float64() if f.type == "numeric" else pa.string()) for i, f in enumerate(model.features)]
    numeric_label = label_kind(model) == "numeric"
    fields += [pa.field(name, pa.float64() if name == "score" or (name == "label" and numeric_label) else pa.int64())
               for name in ("score", "prediction", "label", "label_ts")]
    fields += [pa.field("model_version", pa.string()), pa.field("seq", pa.int64())]
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


def to_frame(table: pa.Table, model: ModelConfig) -> pd.DataFrame:
    """The contract's window frame: id, ts, features, score, prediction, target, label_ts,
    model_version (None where the sender did not say); by ts.
    One multithreaded Arrow conversion of the whole table: several times faster than column by
    column, which concatenates chunks and then copies again to consolidate pandas blocks."""
    micros_utc = pa.timestamp("us", tz="UTC")
    table = table.drop_columns(["seq"])
    for name in ("ts", "label_ts"):  # int64 microseconds -> timestamps: a reinterpretation
        table = table.set_column(table.schema.get_field_index(name), name, pc.cast(table.column(name), micros_utc))
    names = ["id", "ts", *model.feature_names, model.score, model.prediction, model.target, "label_ts", "model_version"]
    names += internal_proba_columns(len(proba_columns(model)))
    table = table.rename_columns(names)
    if model.task == "regression":  # the predicted value is the score; the stored prediction is unused
        table = table.set_column(table.schema.get_field_index(model.prediction), model.prediction,
                                 table.column(model.score))
    with gc_paused():
        # The remaining int64 columns are prediction and target: nullable Int64. NULL text -> None,
        # NULL numbers -> NaN, NULL times -> NaT.
        return table.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get, coerce_temporal_nanoseconds=True)
