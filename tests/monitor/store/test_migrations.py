"""Migrations: ordered, applied once, recorded, transactional, safe under concurrent start-up."""
from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from monitor.errors import StoreError
from monitor.store import MIGRATIONS, Migration, make_engine, migrate, sql
from monitor.store.migrations import applied_versions, check_order


@pytest.fixture
def engine(store_url):
    eng = make_engine(store_url)
    yield eng
    eng.dispose()


def _tables(engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names())


def test_shipped_migrations_are_numbered_in_order():
    check_order(MIGRATIONS)


def test_applies_each_once_and_records_it(engine):
    assert migrate(engine) == [m.version for m in MIGRATIONS]
    assert migrate(engine) == []
    with engine.connect() as conn:
        assert applied_versions(conn) == [m.version for m in MIGRATIONS]
    assert {"schema_migrations", "driftloop_models"} <= _tables(engine)


def test_appended_migration_runs_on_an_existing_store(engine):
    migrate(engine)
    extra = [*MIGRATIONS, Migration(len(MIGRATIONS) + 1, "notes", sql(
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)",
        "CREATE INDEX notes_body ON notes (body)"))]
    assert migrate(engine, extra) == [len(MIGRATIONS) + 1]
    assert "notes" in _tables(engine)
    assert migrate(engine, extra) == []


def test_a_failing_migration_leaves_the_store_as_it_was(engine):
    migrate(engine)
    n = len(MIGRATIONS)
    broken = [*MIGRATIONS,
              Migration(n + 1, "good", sql("CREATE TABLE good (id INTEGER PRIMARY KEY)")),
              Migration(n + 2, "bad", sql("CREATE TABLE bad (id INTEGER PRIMARY KEY)", "THIS IS NOT SQL"))]
    with pytest.raises(StoreError, match=f"migration {n + 2} \\(bad\\) failed"):
        migrate(engine, broken)
    assert not {"good", "bad"} & _tables(engine)
    with engine.connect() as conn:
        assert applied_versions(conn) == [m.version for m in MIGRATIONS]


def test_misnumbered_list_is_refused(engine):
    with pytest.raises(StoreError, match="numbered 1, 2, 3"):
        migrate(engine, [MIGRATIONS[0], Migration(5, "gap", sql("SELECT 1"))])


def test_store_from_a_newer_release_is_refused(engine):
    migrate(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'future', 0)")
    with pytest.raises(StoreError, match=r"schema versions \[99\]"):
        migrate(engine)


def test_concurrent_start_ups_apply_once(store_url):
    engines = [make_engine(store_url) for _ in range(4)]
    results, errors = [], []
    barrier = threading.Barrier(len(engines))

    def start(eng):
        barrier.wait()
        try:
            results.append(migrate(eng))
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(e,)) for e in engines]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for e in engines:
        e.dispose()
    assert errors == []
    assert sorted(len(r) for r in results) == [0, 0, 0, len(MIGRATIONS)]
