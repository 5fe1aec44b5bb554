"""``PredictionStore``: predictions keyed by a caller-given id, labels joined by that id, windows as DataFrames.

Writes are idempotent and atomic per batch. A batch is inserted with ``ON CONFLICT (id) DO NOTHING``
(multi-row statements on SQLite, ``COPY`` on PostgreSQL: inserts.py; the caller's records as
validated batches and rows: inputs.py); when fewer rows went in than were sent, the stored versions
of the batch's ids are compared with the new ones inside the same transaction (conflicts.py):
identical ones are duplicates (a retry), different ones roll the whole batch back with
ConflictError. Batches of concurrent callers share a transaction (group commit, writer.py); each
call returns after the commit that made its batch durable. On SQLite the transaction holds the write
lock from the start; on PostgreSQL the unique index makes a concurrent insert of the same id wait
for the first to commit, after which the comparison sees it.
"""
from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable, Iterator, Sequence

import pandas as pd
import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from monitor.config import DriftloopConfig, ModelConfig
from monitor.errors import Outage, StoreError
from monitor.records.validation import RecordValidator
from monitor.store import conflicts
from monitor.store import sqlite_reader as SR
from monitor.store import window as W
from monitor.store.engine import driver_sql, lock_schema, make_engine, safe_url, sqlite_path, write_transaction
from monitor.store.inputs import EPOCH, label_batch, label_rows, micros, prediction_batch, prediction_rows
from monitor.store.inserts import RowInserter
from monitor.store.migrations import Migration, migrate
from monitor.store.retention import delete_received_before
from monitor.embeddings import INPUT_URI
from monitor.store.schema import proba_columns, stored_column, sync_model_tables
from monitor.store.writer import BatchWriter
from monitor.writable import WriteProblem, space_problem, sqlite_write_problem

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IngestResult:
    stored: int      # new rows written
    duplicates: int  # ids already stored (or repeated in the batch) with the same content

    def to_dict(self) -> dict[str, int]:
        return {"stored": self.stored, "duplicates": self.duplicates}


class PredictionStore:
    """See docs/CONTRACTS.md. ``url`` is any SQLAlchemy URL; SQLite files are shared safely by the
    threads of one process and by several processes; PostgreSQL by several replicas."""

    def __init__(self, url: str, model: ModelConfig, *, clock: Callable[[], float] = time.time,
                 busy_timeout_seconds: float = 30.0, synchronous: str = "FULL",
                 migrations: Sequence[Migration] | None = None, use_adbc: bool = True,
                 child_reader_min_rows: int = W.CHILD_READER_MIN_ROWS, reader_processes: int | None = None,
                 engine: sa.Engine | None = None):
        """``engine``: one already open on ``url``, shared with the stores of the deployment's other
        models (a fleet: one connection pool, migrations run once); it is not disposed by :meth:`close`."""
        self.model = model
        self._clock = clock
        self._owns_engine = engine is None
        self.engine = engine if engine is not None else make_engine(url, busy_timeout_seconds=busy_timeout_seconds,
                                                                    synchronous=synchronous)
        self._busy_timeout = busy_timeout_seconds
        self.url = safe_url(self.engine)
        self.validator = RecordValidator(model, clock=clock)
        try:
            migrate(self.engine, migrations, clock)
            with write_transaction(self.engine) as conn:
                lock_schema(conn)
                self.tables = sync_model_tables(conn, model, clock)
        except sa.exc.SQLAlchemyError as exc:
            if self._owns_engine:
                self.engine.dispose()
            raise StoreError(f"store {self.url}: cannot open: {_reason(exc)}") from exc
        except StoreError:
            if self._owns_engine:
                self.engine.dispose()
            raise
        # Large SQLite windows are read by a child process through ADBC (see window.py).
        self._adbc_path = sqlite_path(self.engine) if use_adbc and W.ADBC_AVAILABLE else None
        self._child_min_rows = child_reader_min_rows
        self._reader_parts = reader_processes or SR.default_parts()
        q = self.engine.dialect.identifier_preparer.quote
        self._q = q
        p, lab = q(self.tables.predictions.name), q(self.tables.labels.name)
        feature_cols = [q(stored_column(f)) for f in model.features]
        pred_cols = ["id", "ts", *feature_cols, "score", "prediction", "received_at", "model_version",
                     *map(q, proba_columns(model)), INPUT_URI]
        dialect = self.engine.dialect.name
        self._prediction_rows = RowInserter(dialect, p, pred_cols)
        self._label_rows = RowInserter(dialect, lab, ["id", "label", "ts", "received_at"])
        # Batches from concurrent callers share transactions (group commit, writer.py).
        self.writer = BatchWriter(lambda: write_transaction(self.engine), name=f"driftloop-writer-{model.name}")

    @classmethod
    def from_config(cls, cfg: DriftloopConfig, **kwargs: Any) -> "PredictionStore":
        options = {"busy_timeout_seconds": cfg.store.busy_timeout_seconds, "synchronous": cfg.store.sqlite_synchronous}
        return cls(cfg.store_url, cfg.model, **{**options, **kwargs})

    # ---- writes ------------------------------------------------------------------------------
    def add_predictions(self, records: Any, *, model_version: str | int | None = None,
                        assumed_version: str | None = None) -> IngestResult:
        """Store a batch atomically. ``records``: a validated :class:`PredictionBatch`, a list of
        API records (validated here), or a DataFrame with the model's columns (and optionally a
        ``model_version`` column). ``model_version`` sets the scoring version of records that do not say.
        ``assumed_version`` (the daemon's champion at arrival) is stored for records that still do not
        say, but, as the server's guess, never compared with a re-sent row (no conflict after a promotion)."""
        batch = prediction_batch(self.validator, self.model, records, model_version)
        n = len(batch)
        if n == 0:
            return IngestResult(0, batch.duplicates)
        rows = prediction_rows(batch, self._now_us(), assumed_version)

        def write(conn: Connection) -> int:
            inserted = self._prediction_rows.insert(conn, rows)
            if inserted < n:
                conflicts.check_predictions(conn, self.tables, self.model, batch)
            return inserted

        inserted = self._write("predictions", write, n)
        return IngestResult(inserted, n - inserted + batch.duplicates)

    def add_labels(self, records: Any) -> IngestResult:
        """Store labels atomically; ``records`` as for :meth:`add_predictions` (id, label, ts)."""
        batch = label_batch(self.validator, self.model, records)
        n = len(batch)
        if n == 0:
            return IngestResult(0, batch.duplicates)
        rows = label_rows(batch, self._now_us())

        def write(conn: Connection) -> int:
            inserted = self._label_rows.insert(conn, rows)
            if inserted < n:
                conflicts.check_labels(conn, self.tables, batch)
            return inserted

        inserted = self._write("labels", write, n)
        return IngestResult(inserted, n - inserted + batch.duplicates)

    def _write(self, what: str, work: Callable[[Connection], int], rows: int) -> int:
        """``work`` in a write transaction, possibly shared with other callers' batches; returns
        once that transaction has committed (see writer.py)."""
        try:
            return self.writer.write(work, rows)
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError(f"store {self.url}: writing {what} failed: {_reason(exc)}") from exc

    @contextmanager
    def _writing(self, what: str) -> Iterator[Connection]:
        try:
            with write_transaction(self.engine) as conn:
                yield conn
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError(f"store {self.url}: writing {what} failed: {_reason(exc)}") from exc

    def write_transaction(self):
        """A write transaction on the store's engine, for other parts' own tables (see engine.py)."""
        return write_transaction(self.engine)

    # ---- reads -------------------------------------------------------------------------------
    def window(self, last_n: int | None = None, since: Any = None, until: Any = None,
               labelled_only: bool = False) -> pd.DataFrame:
        """Predictions with ``since <= ts < until`` (either may be None), the newest ``last_n`` of
        them if given, joined with their labels (``labelled_only``: only rows that have one).
        Columns and dtypes as in docs/CONTRACTS.md, ordered by ts."""
        if last_n is not None and (isinstance(last_n, bool) or not isinstance(last_n, int) or last_n < 1):
            raise ValueError(f"last_n must be a positive integer or None, got {last_n!r}")
        since_us, until_us = micros(since, "since"), micros(until, "until")
        table = None
        if self._adbc_path is not None and (last_n is None or last_n >= self._child_min_rows):
            try:
                with self.engine.connect() as conn:
                    plan = SR.plan(conn, self.tables, self.model, self._q, last_n=last_n, since_us=since_us,
                                   until_us=until_us, labelled_only=labelled_only, parts=self._reader_parts)
                if plan.rows >= self._child_min_rows:
                    table = SR.read(self._adbc_path, plan, W.arrow_schema(self.model))
            except (StoreError, OSError, pa.ArrowException, sa.exc.SQLAlchemyError) as exc:
                # The in-process reader below says what is wrong, if anything is.
                log.warning("fast SQLite window reader failed (%s); reading through SQLAlchemy", exc)
        query = W.build_query(self.tables, self.model, self._q, last_n=last_n, since_us=since_us,
                              until_us=until_us, labelled_only=labelled_only)
        if table is None:
            try:
                with self.engine.connect() as conn:
                    table = W.read_generic(conn, query)
            except sa.exc.SQLAlchemyError as exc:
                raise StoreError(f"store {self.url}: reading the window failed: {_reason(exc)}") from exc
        return W.to_frame(table, self.model)

    def labelled_count(self, since: Any = None, received_after: float | None = None) -> int:
        """Predictions with ``ts >= since`` that have a label, counting only labels received after
        ``received_after`` (epoch seconds) when given: "how much new evidence since the last try"."""
        p, lab = self._q(self.tables.predictions.name), self._q(self.tables.labels.name)
        where, params = [], []
        since_us = micros(since, "since")
        if since_us is not None:
            where.append("p.ts >= ?")
            params.append(since_us)
        if received_after is not None:
            where.append("l.received_at > ?")
            params.append(int(received_after * 1_000_000))
        sql = f"SELECT count(*) FROM {p} p JOIN {lab} l ON l.id = p.id"
        if where:
            sql += " WHERE " + " AND ".join(where)
        return int(self._scalar(driver_sql(self.engine, sql), tuple(params)) or 0)

    def last_label_time(self) -> datetime | None:
        """When the latest label arrived (its ``received_at``), not the latest ``ts`` a label carries:
        a label dated in the future, or a backfill of old ones, says nothing about labels still flowing.
        One probe of the ``received_at`` index."""
        value = self._scalar(f"SELECT max(received_at) FROM {self._q(self.tables.labels.name)}")
        return None if value is None else EPOCH + timedelta(microseconds=int(value))

    def row_counts(self) -> dict[str, int]:
        return {"predictions": int(self._scalar(f"SELECT count(*) FROM {self._q(self.tables.predictions.name)}")),
                "labels": int(self._scalar(f"SELECT count(*) FROM {self._q(self.tables.labels.name)}"))}

    def ping(self) -> None:
        """Raise StoreError unless the store answers a query."""
        self._scalar("SELECT 1")

    def check_writable(self, min_free_bytes: int = 0) -> None:
        """Raise StoreError, with the reason, unless the store can take a write now: PostgreSQL
        answers and is not read-only; a SQLite file takes the write lock within the busy timeout
        (not locked beyond it, not read-only) and its filesystem has ``min_free_bytes`` free.
        Nothing is written."""
        path = sqlite_path(self.engine)
        if path is None:
            if self.engine.dialect.name == "postgresql":
                read_only = self._scalar(
                    "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'")
                if read_only:
                    raise StoreError(
                        f"store {self.url}: PostgreSQL is read-only (a standby, or read-only transactions)",
                        kind=Outage.READ_ONLY)
            else:
                self.ping()
            return
        reason = sqlite_write_problem(path, self._busy_timeout, min_free_bytes)
        if reason is not None:
            raise StoreError(f"store {self.url}: cannot take writes: {reason}", kind=reason.kind)

    def space_problem(self, min_free_bytes: int) -> WriteProblem | None:
        """Why a SQLite store's filesystem cannot take writes now (read-only, or less than
        ``min_free_bytes`` free), else None; None for PostgreSQL, whose disk is not ours to see.
        One ``statvfs``, no lock: ingestion asks it before storing a batch."""
        path = sqlite_path(self.engine)
        return None if path is None else space_problem(path.parent, min_free_bytes)

    def _scalar(self, sql: str, params: tuple = ()) -> Any:
        try:
            with self.engine.connect() as conn:
                return conn.exec_driver_sql(sql, params).scalar()
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError(f"store {self.url}: query failed: {_reason(exc)}") from exc

    # ---- housekeeping ------------------------------------------------------------------------
    def apply_retention(self, days: float, chunk_rows: int = 5000) -> int:
        """Delete rows driftloop *received* more than ``days`` ago; returns rows deleted.

        Age counts from ``received_at``, not from the prediction's ``ts``: a backfill of predictions
        timestamped two years back is kept for ``days`` after it was loaded, not deleted on the next
        run. A label goes when it was received before the cutoff *and* its prediction is no longer
        stored, so a kept prediction always keeps its label (the window's join is unchanged) and a
        label sent before its prediction is not dropped early. Works in chunks of ``chunk_rows``,
        each its own short transaction, so ingestion goes on."""
        if not days > 0:
            raise ValueError(f"retention days must be positive, got {days!r}")
        cutoff = self._now_us() - int(days * 86_400 * 1_000_000)
        total = delete_received_before(self.engine, self.tables, self._q, cutoff, chunk_rows, self._writing)
        if total:
            log.info("retention: deleted %d rows received more than %s days ago", total, days)
        return total

    def close(self) -> None:
        self.writer.close()
        if self._owns_engine:
            self.engine.dispose()

    def __enter__(self) -> "PredictionStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _now_us(self) -> int:
        return int(self._clock() * 1_000_000)


def _reason(exc: sa.exc.SQLAlchemyError) -> str:
    orig = getattr(exc, "orig", None)
    return str(orig if orig is not None else exc).strip().splitlines()[0]


@contextmanager
def state_engine(cfg: DriftloopConfig) -> Iterator[sa.Engine]:
    """An engine on cfg's store, its migrations applied, for the deployment's own tables (checks,
    incidents, retrain attempts, reference levels); disposed on exit.

    Unlike :class:`PredictionStore` it neither creates nor alters a model's tables, nor rewrites its
    ``driftloop_models`` row: ``status``, ``export-samples`` and a retrain's record need none of them,
    and a command run without ``model.features`` (or ``model.task``) must not bring the tables in
    line with the defaults it would otherwise assume."""
    engine = make_engine(cfg.store_url, busy_timeout_seconds=cfg.store.busy_timeout_seconds,
                         synchronous=cfg.store.sqlite_synchronous)
    try:
        try:
            migrate(engine)
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError(f"store {safe_url(engine)}: cannot open: {_reason(exc)}") from exc
        yield engine
    finally:
        engine.dispose()


def labelled_window(cfg: DriftloopConfig, *, last_n: int | None = None, since: Any = None, until: Any = None
                    ) -> pd.DataFrame:
    """The labelled rows a retrain learns from, read from the configured store (the retrain
    child's ``window.source: store``; injected into ``trainer.worker`` by the monitor)."""
    with PredictionStore.from_config(cfg) as store:
        return store.window(last_n=last_n, since=since, until=until, labelled_only=True)
