"""Schema migrations: ordered, append-only lists, applied once each and recorded in ``schema_migrations``.

The store owns its own migrations (``MIGRATIONS`` below); every other part that keeps tables in the
store (the daemon: :mod:`monitor.daemon.state.schema`) **registers** its migrations here with
:func:`register` when its table module is imported, so that the store knows nothing of its owners::

    register(Migration(5, "incidents: notes", sql("ALTER TABLE incidents ADD COLUMN notes TEXT"),
                       owner="daemon"))

Versions are one number space shared by all owners (a version is the primary key of
``schema_migrations``); never edit, renumber or reorder a migration that has shipped, stores in the
field have applied it. Each applied row records its ``owner``: a process that has not loaded an owner
(a trainer child reading the window) leaves that owner's rows alone, while an unknown version of a
*loaded* owner means the store was migrated by a newer release and is refused.

``sql(...)`` runs portable statements in order; for anything dialect-specific give a function
``up(conn)`` that receives the SQLAlchemy connection (``conn.dialect.name`` is ``"sqlite"`` or
``"postgresql"``) and may use SQLAlchemy Core (``table.create(conn)``). All pending migrations run
in one transaction under the schema lock (SQLite: ``BEGIN IMMEDIATE`` waiting under the busy
timeout; PostgreSQL: an advisory lock), and the applied versions are read again inside that lock,
so concurrent start-ups apply each exactly once and a failing migration leaves the store as it was.

Per-model tables (predictions and labels, one column per feature) follow the configured model and
are kept in step by :mod:`monitor.store.schema` after these migrations; a migration that must change
every model's tables can iterate over the ``driftloop_models`` registry created by migration 1.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from monitor.errors import StoreError
from monitor.store.engine import driver_sql, lock_schema, write_transaction


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    up: Callable[[Connection], None]
    owner: str = "store"  # the part whose tables these are


def sql(*statements: str) -> Callable[[Connection], None]:
    """A migration body that runs plain SQL statements in order."""
    def up(conn: Connection) -> None:
        for statement in statements:
            conn.exec_driver_sql(statement)
    return up


MIGRATIONS: list[Migration] = [
    Migration(1, "model registry", sql(
        # One row per model whose tables live in this store; features_json is the model's feature
        # list as last synchronised (name -> type), for tools and for migrations over all models.
        "CREATE TABLE driftloop_models ("
        " name TEXT PRIMARY KEY,"
        " predictions_table TEXT NOT NULL,"
        " labels_table TEXT NOT NULL,"
        " features_json TEXT NOT NULL,"
        " created_at BIGINT NOT NULL,"
        " updated_at BIGINT NOT NULL)",
    )),
]


_REGISTERED: dict[int, Migration] = {}


def register(*migrations: Migration) -> None:
    """Add an owner's migrations to those :func:`migrate` applies. Registering the same migration
    again (a module imported twice) is a no-op; another migration under a taken version is a bug."""
    for m in migrations:
        taken = _REGISTERED.get(m.version)
        if taken is not None and taken != m:
            raise StoreError(f"migration {m.version} is registered twice: {taken.owner}/{taken.name!r} and "
                             f"{m.owner}/{m.name!r}")
        _REGISTERED[m.version] = m


def registered() -> list[Migration]:
    """Every migration known in this process, in version order."""
    return sorted(_REGISTERED.values(), key=lambda m: m.version)


register(*MIGRATIONS)


def check_order(migrations: Sequence[Migration]) -> None:
    versions = [m.version for m in migrations]
    if versions != sorted(set(versions)) or (versions and versions[0] < 1):
        raise StoreError(f"migrations must be numbered 1, 2, 3, ... in order, each once; got {versions}")


def applied_versions(conn: Connection, owners: set[str] | None = None) -> list[int]:
    rows = conn.exec_driver_sql("SELECT version, owner FROM schema_migrations ORDER BY version").all()
    return [r[0] for r in rows if owners is None or r[1] in owners]


def _create_ledger(conn: Connection) -> None:
    """``schema_migrations`` itself, with its ``owner`` column (added to ledgers from releases before
    owners registered their migrations: their daemon rows are named ``daemon: ...``)."""
    conn.exec_driver_sql(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL,"
        " owner TEXT NOT NULL DEFAULT 'store')")
    columns = {c["name"] for c in sa.inspect(conn).get_columns("schema_migrations")}
    if "owner" not in columns:
        conn.exec_driver_sql("ALTER TABLE schema_migrations ADD COLUMN owner TEXT NOT NULL DEFAULT 'store'")
        conn.exec_driver_sql("UPDATE schema_migrations SET owner = 'daemon' WHERE substr(name, 1, 7) = 'daemon:'")


def migrate(engine: Engine, migrations: Sequence[Migration] | None = None,
            clock: Callable[[], float] = time.time) -> list[int]:
    """Apply the pending migrations; returns the versions applied now (empty when up to date)."""
    migrations = registered() if migrations is None else migrations
    check_order(migrations)
    with write_transaction(engine) as conn:  # SQLite: BEGIN IMMEDIATE, waits under the busy timeout
        lock_schema(conn)                    # PostgreSQL: advisory lock until commit
        _create_ledger(conn)
        # Read inside the lock: a concurrent start-up that got in first has applied them already.
        done = set(applied_versions(conn, {m.owner for m in migrations}))
        newer = sorted(done - {m.version for m in migrations})
        if newer:
            raise StoreError(f"the store has schema versions {newer} that this driftloop does not know; "
                             "it was migrated by a newer release (upgrade driftloop, or use another store)")
        applied = []
        for m in migrations:
            if m.version in done:
                continue
            try:
                m.up(conn)
            except Exception as exc:
                raise StoreError(f"migration {m.version} ({m.name}) failed: {exc}") from exc
            conn.exec_driver_sql(
                driver_sql(conn, "INSERT INTO schema_migrations (version, name, applied_at, owner)"
                                 " VALUES (?, ?, ?, ?)"),
                (m.version, m.name, int(clock()), m.owner))
            applied.append(m.version)
    return applied

