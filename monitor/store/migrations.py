"""Schema migrations: an ordered, append-only list, applied once each and recorded in ``schema_migrations``.

To change the schema, append a :class:`Migration` with the next version number to ``MIGRATIONS``
(never edit or reorder one that has shipped; stores in the field have already applied it)::

    MIGRATIONS.append(Migration(2, "incidents", sql(
        "CREATE TABLE incidents (id INTEGER PRIMARY KEY, state TEXT NOT NULL, opened_at BIGINT NOT NULL)",
        "CREATE INDEX incidents_state ON incidents (state)",
    )))

``sql(...)`` runs portable statements in order; for anything dialect-specific give a function
``up(conn)`` that receives the SQLAlchemy connection (``conn.dialect.name`` is ``"sqlite"`` or
``"postgresql"``) and may use SQLAlchemy Core (``table.create(conn)``). All pending migrations run
in one transaction under the schema lock, so concurrent start-ups apply each exactly once and a
failing migration leaves the store as it was.

Per-model tables (predictions and labels, one column per feature) follow the configured model and
are kept in step by :mod:`monitor.store.schema` after these migrations; a migration that must change
every model's tables can iterate over the ``driftloop_models`` registry created by migration 1.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

from sqlalchemy.engine import Connection, Engine

from monitor.errors import StoreError
from monitor.store.engine import driver_sql, lock_schema, write_transaction


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    up: Callable[[Connection], None]


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


def _daemon_tables_v1(conn: Connection) -> None:
    # Owned by the daemon (monitor/daemon/schema.py); imported here lazily to keep the store light.
    from monitor.daemon.schema import create_tables_v1
    create_tables_v1(conn)


MIGRATIONS.append(Migration(2, "daemon: check results, incidents, incident events, retrain attempts",
                            _daemon_tables_v1))


def _incidents_v2(conn: Connection) -> None:
    from monitor.daemon.schema import incidents_v2
    incidents_v2(conn)


MIGRATIONS.append(Migration(3, "daemon: incidents remember the change point, the reference level and escalation",
                            _incidents_v2))


def _alert_deliveries(conn: Connection) -> None:
    from monitor.daemon.schema import create_alert_deliveries
    create_alert_deliveries(conn)


MIGRATIONS.append(Migration(4, "daemon: Alertmanager deliveries seen (dedup by fingerprint and startsAt)",
                            _alert_deliveries))


def check_order(migrations: Sequence[Migration]) -> None:
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise StoreError(f"migrations must be numbered 1, 2, 3, ... in order; got {versions}")


def applied_versions(conn: Connection) -> list[int]:
    rows = conn.exec_driver_sql("SELECT version FROM schema_migrations ORDER BY version").all()
    return [r[0] for r in rows]


def migrate(engine: Engine, migrations: Sequence[Migration] | None = None,
            clock: Callable[[], float] = time.time) -> list[int]:
    """Apply the pending migrations; returns the versions applied now (empty when up to date)."""
    migrations = MIGRATIONS if migrations is None else migrations
    check_order(migrations)
    with write_transaction(engine) as conn:
        lock_schema(conn)
        conn.exec_driver_sql(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)")
        done = set(applied_versions(conn))
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
                driver_sql(conn, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)"),
                (m.version, m.name, int(clock())))
            applied.append(m.version)
    return applied

