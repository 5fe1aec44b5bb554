"""Per-model tables: ``predictions_<model>`` with one typed column per feature, and ``labels_<model>``.

Typed columns (``f_<feature>``: DOUBLE for numeric, TEXT for categorical; ``e_<feature>``: a BLOB
of ``dim`` little-endian float32 for an embedding, :mod:`monitor.embeddings`) keep writes to one
executemany and let a million-row window come back as columns, not as JSON parsed row by row.
Labels have their own table keyed by id, so they may arrive before or after their prediction; the
window query joins the two.

The tables follow the configured feature list, synchronised at start-up (:func:`sync_model_tables`):

* a new feature becomes a new nullable column (rows stored before it read as NaN / None);
* a feature no longer configured keeps its column and data, and is ignored;
* ``model_version`` (the version that scored a row) and ``input_uri`` (its raw-input reference)
  are added to tables made before they existed;
* a feature whose type changed (numeric <-> categorical, either <-> embedding) or an embedding
  whose ``dim`` changed is an error: the stored values cannot be reinterpreted. Rename the feature,
  or use a new ``model.name`` (new tables). An embedding's stored dim is read from its stored
  vectors (the first non-NULL one's length), so it holds whatever the configuration said before.
"""
from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass
from typing import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from monitor.config import FeatureSpec, ModelConfig
from monitor.embeddings import EMBEDDING_PREFIX, INPUT_URI
from monitor.errors import StoreError
from monitor.store.engine import driver_sql

log = logging.getLogger(__name__)

FEATURE_PREFIX = "f_"
PROBA_PREFIX = "p_"  # multiclass: p_<class index>, the probability of each class


def proba_columns(model: ModelConfig) -> list[str]:
    """The stored per-class probability columns of a multiclass model (none for other tasks), one
    per column of the task's window frame (:meth:`monitor.tasks.Task.proba_columns`)."""
    return [f"{PROBA_PREFIX}{i}" for i in range(len(model.kind.proba_columns(model.n_classes)))]


def label_kind(model: ModelConfig) -> str:
    """How a label is stored: ``numeric`` (regression: a number) or ``class`` (0/1 or a class index)."""
    return model.kind.stored_label


@dataclass(frozen=True)
class ModelTables:
    predictions: sa.Table
    labels: sa.Table


def table_suffix(model_name: str) -> str:
    return re.sub(r"[^a-z0-9_]", "_", model_name.lower())


def stored_column(spec: FeatureSpec) -> str:
    """The column a feature is stored in: ``f_<name>`` (numeric, categorical) or ``e_<name>`` (embedding)."""
    return (EMBEDDING_PREFIX if spec.type == "embedding" else FEATURE_PREFIX) + spec.name


def _feature_type(kind: str) -> sa.types.TypeEngine:
    # LargeBinary: BLOB on SQLite, BYTEA on PostgreSQL.
    return sa.Double() if kind == "numeric" else sa.LargeBinary() if kind == "embedding" else sa.Text()


def build_tables(model: ModelConfig) -> ModelTables:
    suffix = table_suffix(model.name)
    meta = sa.MetaData()
    pname, lname = f"predictions_{suffix}", f"labels_{suffix}"
    predictions = sa.Table(
        pname, meta,
        # An integer key orders rows with equal ts by arrival; in SQLite it is the rowid itself.
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("id", sa.Text(), nullable=False, unique=True),
        sa.Column("ts", sa.BigInteger(), nullable=False),  # microseconds since the epoch, UTC
        *[sa.Column(stored_column(f), _feature_type(f.type), nullable=True) for f in model.features],
        # binary: P(1); multiclass: the served class's probability; regression: the predicted value.
        sa.Column("score", sa.Double(), nullable=False),
        # binary: 0/1; multiclass: the served class's index into model.classes; regression: 0 (unused).
        sa.Column("prediction", sa.SmallInteger(), nullable=False),
        *[sa.Column(c, sa.Double(), nullable=True) for c in proba_columns(model)],
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        # The registry version that scored the row; NULL when the sender did not say ("unknown").
        sa.Column("model_version", sa.Text(), nullable=True),
        # A path or key of the raw input (an image, a document) the sender keeps; never fetched here.
        sa.Column(INPUT_URI, sa.Text(), nullable=True),
        sa.Index(f"{pname}_ts", "ts", "seq"),
        # Retention deletes by received_at (when driftloop got the row, not the prediction's ts, so a
        # backfill of old predictions is kept). "_r": the name fits PostgreSQL's 63 characters.
        sa.Index(received_index(pname), "received_at"),
    )
    labels = sa.Table(
        lname, meta,
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column("label", sa.Double() if label_kind(model) == "numeric" else sa.SmallInteger(), nullable=False),
        sa.Column("ts", sa.BigInteger(), nullable=False),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.Index(f"{lname}_ts", "ts"),
        sa.Index(received_index(lname), "received_at"),
        sqlite_with_rowid=False,  # the join probes labels by id: one B-tree search instead of two
    )
    return ModelTables(predictions, labels)


def received_index(table: str) -> str:
    return f"{table}_r"


def _ensure_received_indexes(conn: Connection, tables: ModelTables) -> None:
    """Tables made before retention counted from ``received_at`` get its index (IF NOT EXISTS: SQLite
    and PostgreSQL both have it). On a large PostgreSQL table this build blocks writes while it runs."""
    prep = conn.dialect.identifier_preparer
    for table in (tables.predictions, tables.labels):
        conn.exec_driver_sql(f"CREATE INDEX IF NOT EXISTS {prep.quote(received_index(table.name))} "
                             f"ON {prep.quote(table.name)} (received_at)")


def _kind_of(sql_type: sa.types.TypeEngine) -> str:
    if isinstance(sql_type, sa.Float):
        return "numeric"
    if isinstance(sql_type, sa.String):
        return "categorical"
    if isinstance(sql_type, sa.LargeBinary):
        return "embedding"
    return str(sql_type)


def sync_model_tables(conn: Connection, model: ModelConfig, clock: Callable[[], float] = time.time) -> ModelTables:
    """Create the model's tables, or bring their feature columns in line with ``model``.
    Call inside a write transaction holding the schema lock."""
    tables = build_tables(model)
    pred = tables.predictions
    inspector = sa.inspect(conn)
    if not inspector.has_table(pred.name):
        pred.create(conn)
        log.info("created table %s for model %r (%d features)", pred.name, model.name, len(model.features))
    else:
        existing = {c["name"]: _kind_of(c["type"]) for c in inspector.get_columns(pred.name)}
        problems = _type_changes(conn, pred.name, model, existing)
        if problems:
            raise StoreError(f"model {model.name!r}: feature types changed: {'; '.join(problems)}. Stored values "
                             "cannot be reinterpreted: rename the feature or use a new model.name")
        for spec in model.features:
            column = stored_column(spec)
            if column not in existing:
                ddl = _feature_type(spec.type).compile(dialect=conn.dialect)
                prep = conn.dialect.identifier_preparer
                conn.exec_driver_sql(f"ALTER TABLE {prep.quote(pred.name)} ADD COLUMN {prep.quote(column)} {ddl}")
                log.info("model %r: new feature %r (%s) added to %s; earlier rows read as missing",
                         model.name, spec.name, spec.type, pred.name)
        for column in proba_columns(model):  # a class added to model.classes: earlier rows read as missing
            if column not in existing:
                prep = conn.dialect.identifier_preparer
                conn.exec_driver_sql(f"ALTER TABLE {prep.quote(pred.name)} ADD COLUMN {prep.quote(column)} "
                                     f"{sa.Double().compile(dialect=conn.dialect)}")
        for column, what in (("model_version", "version 'unknown'"), (INPUT_URI, "without a raw-input reference")):
            if column not in existing:  # tables made before predictions carried it
                prep = conn.dialect.identifier_preparer
                conn.exec_driver_sql(f"ALTER TABLE {prep.quote(pred.name)} ADD COLUMN {column} TEXT")
                log.info("model %r: column %s added to %s; earlier rows read as %s", model.name, column, pred.name,
                         what)
        configured = {stored_column(f) for f in model.features}
        dropped = sorted(c[2:] for c in existing if c.startswith((FEATURE_PREFIX, EMBEDDING_PREFIX))
                         and c not in configured)
        if dropped:
            log.info("model %r: stored features no longer configured are kept but ignored: %s",
                     model.name, ", ".join(dropped))
    if not inspector.has_table(tables.labels.name):
        tables.labels.create(conn)
    else:
        stored = {c["name"]: c["type"] for c in inspector.get_columns(tables.labels.name)}.get("label")
        numeric = stored is not None and isinstance(stored, sa.Float)
        if stored is not None and numeric != (label_kind(model) == "numeric"):
            raise StoreError(f"model {model.name!r}: its stored labels are {'numbers' if numeric else 'classes'} "
                             f"but the model is a {model.task} model; use a new model.name for a model of "
                             "another task (new tables)")
    _ensure_received_indexes(conn, tables)
    _register(conn, model, tables, int(clock()))
    return tables


def _type_changes(conn: Connection, table: str, model: ModelConfig, existing: dict[str, str]) -> list[str]:
    """One line per configured feature whose stored column holds another type or another dim."""
    quote = conn.dialect.identifier_preparer.quote
    problems = []
    for spec in model.features:
        stored = [existing[c] for c in (FEATURE_PREFIX + spec.name, EMBEDDING_PREFIX + spec.name) if c in existing]
        if stored and spec.type not in stored:
            problems.append(f"{spec.name!r} is stored as {stored[0]} but configured as {spec.type}")
        elif spec.type == "embedding" and stored:
            column = quote(stored_column(spec))
            size = conn.exec_driver_sql(f"SELECT length({column}) FROM {quote(table)} "
                                        f"WHERE {column} IS NOT NULL LIMIT 1").scalar()
            if size is not None and int(size) != 4 * (spec.dim or 0):
                problems.append(f"{spec.name!r} is stored with dim {int(size) // 4} but configured with dim "
                                f"{spec.dim}")
    return problems


def _register(conn: Connection, model: ModelConfig, tables: ModelTables, now: int) -> None:
    features = json.dumps({f.name: f.type if f.dim is None else {"type": f.type, "dim": f.dim} for f in model.features})
    conn.exec_driver_sql(driver_sql(conn,
        "INSERT INTO driftloop_models (name, predictions_table, labels_table, features_json, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET features_json = excluded.features_json,"
        " updated_at = excluded.updated_at"),
        (model.name, tables.predictions.name, tables.labels.name, features, now, now))
