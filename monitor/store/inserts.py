"""Inserting a batch of rows, ``ON CONFLICT (id) DO NOTHING``, the fastest way each backend offers.

Each returns how many rows went in (the rest were ids already stored, which the caller compares,
conflicts.py). Values are bound as they are, never rendered into SQL text, so a float is stored
exactly as sent and a re-sent row compares equal.

* SQLite: multi-row ``INSERT ... VALUES (...), (...)`` of up to 512 rows per statement, in
  power-of-two chunks (a handful of distinct statements, each prepared once per connection and
  cached by the sqlite3 module). ``executemany`` steps SQLite once per row and gives up the GIL each
  time; under load a writer thread then waits for the GIL a thousand times per batch.
* PostgreSQL: ``COPY`` into a session-local temporary table shaped like the target's columns, then
  ``INSERT ... SELECT ... ON CONFLICT (id) DO NOTHING`` (``COPY`` itself cannot skip conflicts).
  The temporary table lives in the same transaction's connection and is emptied after each batch.
* Anything else: ``executemany``.
"""
from __future__ import annotations

import sqlite3
import zlib
from contextlib import contextmanager
from itertools import chain
from typing import Any, Iterator, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from monitor.store.engine import driver_sql

MAX_ROWS_PER_STATEMENT = 512


class RowInserter:
    """Inserts rows of ``columns`` (already quoted) into ``table`` (quoted) for one dialect."""

    def __init__(self, dialect: str, table: str, columns: Sequence[str]):
        self.dialect = dialect
        self.table = table
        self.columns = list(columns)
        self._names = ", ".join(self.columns)
        self._row = "(" + ", ".join("?" * len(self.columns)) + ")"
        self._multi: dict[int, str] = {}
        # One row per statement (``?`` placeholders): the executemany path, and benchmarks' baseline.
        self.single = f"INSERT INTO {table} ({self._names}) VALUES {self._row} ON CONFLICT (id) DO NOTHING"
        # One staging table per target and column list (a column added at a restart makes another).
        self._stage = f"driftloop_stage_{zlib.crc32(f'{table}({self._names})'.encode()):08x}"

    def insert(self, conn: Connection, rows: list[tuple]) -> int:
        if not rows:
            return 0
        if self.dialect == "sqlite":
            with _translated(conn, self.single):
                return self._sqlite(conn, rows)
        if self.dialect == "postgresql":
            with _translated(conn, f"COPY {self._stage}"):
                return self._copy(conn, rows)
        return int(conn.exec_driver_sql(driver_sql(conn, self.single), rows).rowcount)

    # ---- SQLite ---------------------------------------------------------------------------------
    def _sqlite(self, conn: Connection, rows: list[tuple]) -> int:
        dbapi: sqlite3.Connection = conn.connection.driver_connection  # type: ignore[assignment]
        top = self._chunk_rows(dbapi)
        cursor = dbapi.cursor()
        inserted = 0
        try:
            start, k = 0, top
            while start < len(rows):
                while k > len(rows) - start:
                    k //= 2
                cursor.execute(self._statement(k), tuple(chain.from_iterable(rows[start:start + k])))
                inserted += cursor.rowcount
                start += k
        finally:
            cursor.close()
        return inserted

    def _chunk_rows(self, dbapi: sqlite3.Connection) -> int:
        try:
            limit = dbapi.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        except (AttributeError, sqlite3.Error):  # Python < 3.11: SQLite's historic default
            limit = 999
        k = 1
        while k * 2 <= min(MAX_ROWS_PER_STATEMENT, limit // len(self.columns)):
            k *= 2
        return k

    def _statement(self, k: int) -> str:
        sql = self._multi.get(k)
        if sql is None:
            sql = self._multi[k] = (f"INSERT INTO {self.table} ({self._names}) VALUES "
                                    + ", ".join([self._row] * k) + " ON CONFLICT (id) DO NOTHING")
        return sql

    # ---- PostgreSQL -----------------------------------------------------------------------------
    def _copy(self, conn: Connection, rows: list[tuple]) -> int:
        raw: Any = conn.connection.driver_connection  # psycopg.Connection, inside the caller's transaction
        with raw.cursor() as cur:
            # Not cached per connection: a rolled-back transaction takes a table created in it along.
            cur.execute(f"CREATE TEMP TABLE IF NOT EXISTS {self._stage} AS "
                        f"SELECT {self._names} FROM {self.table} WITH NO DATA")
            with cur.copy(f"COPY {self._stage} ({self._names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            cur.execute(f"INSERT INTO {self.table} ({self._names}) SELECT {self._names} FROM {self._stage} "
                        "ON CONFLICT (id) DO NOTHING")
            inserted = cur.rowcount
            cur.execute(f"TRUNCATE {self._stage}")
        return int(inserted)


@contextmanager
def _translated(conn: Connection, statement: str) -> Iterator[None]:
    """The driver's own errors (these paths use its cursor directly) as SQLAlchemy's, as elsewhere."""
    dbapi = conn.dialect.loaded_dbapi
    try:
        yield
    except dbapi.Error as exc:
        raise sa.exc.DBAPIError.instance(statement, None, exc, dbapi.Error) from exc
