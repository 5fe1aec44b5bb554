"""SQLAlchemy engines for the store, with the settings each backend needs to be shared safely.

SQLite (the default, one file under ``home``): WAL so that readers never block the writer, a busy
timeout so that writers from other threads and processes wait instead of failing, and transactions
begun by us rather than by the sqlite3 module (its implicit BEGIN is deferred, and a deferred
transaction that reads and then writes can fail at once with SQLITE_BUSY when another writer got in
between). :func:`write_transaction` begins ``BEGIN IMMEDIATE``: it takes the write lock up front and
waits for it under the busy timeout. Reads use a plain deferred ``BEGIN``.

Bounded waits. The writers of one process queue on an in-process lock (:class:`_WriteGate`) before
asking SQLite for its lock, so they wait for each other in turn (SQLite's busy handler polls with
sleeps, which is neither fair nor prompt) and SQLite's own wait only ever covers another process.
Code serving a request runs under :func:`bounded_wait` (the HTTP server sets it for every request;
worker threads started through anyio inherit it): there a store call waits at most that long, for
the in-process queue and SQLite's lock together, and then fails like a busy timeout would (an
``OperationalError``, answered 503 + Retry-After). Background jobs keep the full busy timeout.

PostgreSQL: psycopg 3; ``postgresql://`` and ``postgres://`` URLs are read as ``postgresql+psycopg://``.
"""
from __future__ import annotations

import sqlite3
import threading
import time
import weakref
import zlib
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Iterator

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import StaticPool

from monitor.errors import Outage, StoreError

_IMMEDIATE = "driftloop_immediate"
_BUSY_MS = "driftloop_busy_ms"
# Key of the transaction-scoped advisory lock that serialises schema changes on PostgreSQL.
SCHEMA_LOCK_KEY = zlib.crc32(b"driftloop.schema")

# Seconds a store call may wait for a lock in this context (None: the engine's busy timeout).
_REQUEST_WAIT: ContextVar[float | None] = ContextVar("driftloop_store_request_wait", default=None)
# Monotonic time by which the write transaction under way must hold SQLite's lock.
_DEADLINE: ContextVar[float | None] = ContextVar("driftloop_store_deadline", default=None)


@contextmanager
def bounded_wait(seconds: float) -> Iterator[None]:
    """Store calls made in this context wait at most ``seconds`` for a lock (each call; the
    first that cannot have it fails, so a request fails within about ``seconds``)."""
    token = _REQUEST_WAIT.set(seconds)
    try:
        yield
    finally:
        _REQUEST_WAIT.reset(token)


def request_wait() -> float | None:
    """The bound :func:`bounded_wait` set for this context, or None outside one (other locks a
    request may meet, such as the daemon's controller, are bounded by it too)."""
    return _REQUEST_WAIT.get()


def _allowed_wait(busy_timeout: float) -> float:
    wait = _REQUEST_WAIT.get()
    return busy_timeout if wait is None else min(wait, busy_timeout)


class _WriteGate:
    """The in-process queue of a SQLite engine's writers (see the module docstring). Re-entrant:
    a writer that opens a second write transaction meets SQLite's lock as before, not a deadlock.
    ``locked_since``: when a writer of this process last failed to get SQLite's lock (another
    process holds it), None once one gets it again (see :func:`lock_contended`)."""

    def __init__(self, busy_timeout: float):
        self.lock = threading.RLock()
        self.busy_timeout = busy_timeout
        self.locked_since: float | None = None


_GATES: "weakref.WeakKeyDictionary[Engine, _WriteGate]" = weakref.WeakKeyDictionary()


def lock_contended(engine: Engine) -> bool:
    """Whether the last attempt of this process to take the store's write lock failed for the
    lock, with none succeeding since: the store is locked from outside (SQLite; always False on
    PostgreSQL, whose waits are per row). Callers that queue for the store before asking it (the
    ingestion workers) bound that queueing too while this holds, so a locked store is a prompt
    503 for every request rather than for the first few."""
    gate = _GATES.get(engine)
    return gate is not None and gate.locked_since is not None


def normalise_url(url: str) -> sa.URL:
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise StoreError(f"store.url: not a valid SQLAlchemy URL: {url!r}") from exc
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def safe_url(engine_or_url: Engine | sa.URL) -> str:
    url = engine_or_url.url if isinstance(engine_or_url, Engine) else engine_or_url
    return url.render_as_string(hide_password=True)


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def sqlite_path(engine: Engine) -> Path | None:
    """The database file of a file-backed SQLite engine, else None."""
    database = engine.url.database
    if not is_sqlite(engine) or not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


def make_engine(url: str, *, busy_timeout_seconds: float = 30.0, synchronous: str = "FULL",
                pool_size: int = 8) -> Engine:
    parsed = normalise_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed, busy_timeout_seconds, synchronous)
    try:
        engine = sa.create_engine(parsed, pool_pre_ping=True, pool_size=pool_size, max_overflow=pool_size)
    except (ImportError, sa.exc.ArgumentError, sa.exc.NoSuchModuleError) as exc:
        raise StoreError(f"store.url {safe_url(parsed)}: {exc}") from exc
    if engine.dialect.name == "postgresql":
        event.listen(engine, "begin", _bounded_postgresql_begin)
    return engine


def _bounded_postgresql_begin(conn: Connection) -> None:
    """Under :func:`bounded_wait`, a transaction waits for a lock (a row another transaction is
    writing, a table someone locked) at most that long: PostgreSQL's ``lock_timeout``, for this
    transaction only."""
    wait = _REQUEST_WAIT.get()
    if wait is not None:
        conn.exec_driver_sql(f"SET LOCAL lock_timeout = {max(1, int(wait * 1000))}")


def _sqlite_engine(url: sa.URL, busy_timeout_seconds: float, synchronous: str) -> Engine:
    memory = not url.database or url.database == ":memory:"
    if not memory:
        Path(str(url.database)).parent.mkdir(parents=True, exist_ok=True)
    kwargs: dict = {"connect_args": {"check_same_thread": False, "timeout": busy_timeout_seconds}}
    if memory:
        # One connection shared by every thread, or each would see its own empty database.
        kwargs["poolclass"] = StaticPool
    else:
        kwargs.update(pool_size=8, max_overflow=8)
    engine = sa.create_engine(url, **kwargs)
    _GATES[engine] = _WriteGate(busy_timeout_seconds)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, record) -> None:  # noqa: ANN001
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (see module docstring)
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_seconds * 1000)}")
        record.info[_BUSY_MS] = int(busy_timeout_seconds * 1000)
        if not memory:
            _ensure_wal(dbapi_conn, busy_timeout_seconds)
        cur.execute(f"PRAGMA synchronous={synchronous}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        deadline = _DEADLINE.get()
        wait = _allowed_wait(busy_timeout_seconds) if deadline is None else max(0.0, deadline - time.monotonic())
        busy_ms = int(wait * 1000)
        if conn.info.get(_BUSY_MS) != busy_ms:  # per connection; one PRAGMA when the bound changes
            conn.exec_driver_sql(f"PRAGMA busy_timeout={busy_ms}")
            conn.info[_BUSY_MS] = busy_ms
        immediate = conn.get_execution_options().get(_IMMEDIATE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


_WAL_LOCK = threading.Lock()


def _ensure_wal(dbapi_conn: sqlite3.Connection, timeout: float) -> None:
    """Switch the file to WAL once. WAL is a property of the file, so a connection that finds it
    already set does nothing. Switching needs an exclusive lock that SQLite takes without calling
    the busy handler, so connections opening a fresh file together got SQLITE_BUSY at once: the
    switch is done under a process-wide lock (threads) and retried until ``timeout`` (processes)."""
    deadline = time.monotonic() + timeout
    delay = 0.001
    with _WAL_LOCK:
        while True:
            try:
                # Even reading the mode can meet SQLITE_BUSY while another process switches the
                # file or cleans up its WAL (no busy handler there either): read and set both retry.
                if _journal_mode(dbapi_conn) == "wal" or _journal_mode(dbapi_conn, "WAL") == "wal":
                    return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
            if time.monotonic() >= deadline:
                raise sqlite3.OperationalError("database is locked (switching to WAL)")
            time.sleep(delay)
            delay = min(delay * 2, 0.05)


def _journal_mode(dbapi_conn: sqlite3.Connection, set_to: str | None = None) -> str:
    cur = dbapi_conn.cursor()
    try:
        row = cur.execute("PRAGMA journal_mode" + (f"={set_to}" if set_to else "")).fetchone()
    finally:
        cur.close()
    return str(row[0]).lower() if row else ""


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """A transaction that will write: holds SQLite's write lock from the start (waiting for it up
    to the busy timeout), so a read-then-write inside it cannot fail half-way on lock upgrade.
    Other parts writing their own tables (the daemon) should use this too. On SQLite the wait,
    in-process queue included, is bounded by :func:`bounded_wait` where one is in force."""
    gate = _GATES.get(engine)
    if gate is None:  # PostgreSQL: row locks, no file lock to queue for
        with engine.connect() as conn, conn.begin():
            yield conn
        return
    wait = _allowed_wait(gate.busy_timeout)
    if not gate.lock.acquire(timeout=wait):
        # Fails as SQLite's busy timeout does, so every caller handles it the same way.
        raise sa.exc.OperationalError("BEGIN IMMEDIATE", None, sqlite3.OperationalError(
            f"database is locked (other writers of this process held it for {wait:g} s)"))
    token = _DEADLINE.set(time.monotonic() + wait)
    began = False
    try:
        with engine.connect() as conn:
            conn.execution_options(**{_IMMEDIATE: True})
            with conn.begin():
                began = True
                gate.locked_since = None
                yield conn
    except sa.exc.OperationalError as exc:
        if not began and _is_lock_error(exc):
            gate.locked_since = gate.locked_since or time.monotonic()
        raise
    finally:
        _DEADLINE.reset(token)
        gate.lock.release()


def probe_write_lock(engine: Engine) -> None:
    """Take the write lock and let it go at once (an empty transaction: nothing is written), waiting
    as any write would here; raise :class:`StoreError` when it cannot be had. For a caller about to
    spend CPU on a write while :func:`lock_contended` says it will probably fail."""
    try:
        with write_transaction(engine):
            pass
    except sa.exc.OperationalError as exc:
        raise StoreError(f"the store is locked ({exc.orig})", kind=Outage.LOCKED) from exc


def _is_lock_error(exc: sa.exc.OperationalError) -> bool:
    text = str(exc.orig).lower()
    return "locked" in text or "busy" in text


def lock_schema(conn: Connection) -> None:
    """Serialise schema changes between processes sharing a PostgreSQL store (SQLite's
    BEGIN IMMEDIATE already does). Released at the end of the transaction."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({SCHEMA_LOCK_KEY})")


def driver_sql(conn: Connection | Engine, statement: str) -> str:
    """``?`` placeholders rewritten in the driver's own style: ``exec_driver_sql`` passes SQL through
    untouched, and sqlite3 wants ``?`` where psycopg wants ``%s``. Statements must not contain ``%``."""
    return statement if conn.dialect.paramstyle == "qmark" else statement.replace("?", "%s")
