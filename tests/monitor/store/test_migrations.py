"""Migrations: ordered, applied once, recorded, transactional, safe under concurrent start-up."""
from __future__ import annotations

import multiprocessing
import threading

import pytest
import sqlalchemy as sa

from monitor.errors import StoreError
from monitor.store import MIGRATIONS, Migration, make_engine, migrate, sql
from monitor.store.migrations import applied_versions, check_order, register, registered


@pytest.fixture
def engine(store_url):
    eng = make_engine(store_url)
    yield eng
    eng.dispose()


def _tables(engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names())


def _versions(migrations) -> list[int]:
    return [m.version for m in migrations]


def test_shipped_migrations_are_numbered_in_order():
    import monitor.daemon.state.tables  # noqa: F401  (the daemon registers its migrations on import)
    check_order(registered())
    assert {m.owner for m in registered()} == {"store", "daemon"}


def test_applies_each_once_and_records_it(engine):
    assert migrate(engine) == _versions(registered())
    assert migrate(engine) == []
    with engine.connect() as conn:
        assert applied_versions(conn) == _versions(registered())
    assert {"schema_migrations", "driftloop_models"} <= _tables(engine)


def test_appended_migration_runs_on_an_existing_store(engine):
    migrate(engine)
    n = max(_versions(registered()))
    extra = [*registered(), Migration(n + 1, "notes", sql(
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)",
        "CREATE INDEX notes_body ON notes (body)"), owner="notes")]
    assert migrate(engine, extra) == [n + 1]
    assert "notes" in _tables(engine)
    assert migrate(engine, extra) == []


def test_an_owner_not_loaded_here_is_left_alone_but_its_unknown_versions_are_refused(engine):
    """A process that has not loaded an owner (a trainer child) migrates the store's own tables and
    leaves that owner's rows be; a newer version of a loaded owner is a newer release's store."""
    n = max(_versions(registered()))
    notes = Migration(n + 1, "notes", sql("CREATE TABLE notes (id INTEGER PRIMARY KEY)"), owner="notes")
    assert migrate(engine, [*registered(), notes])[-1] == n + 1
    assert migrate(engine, MIGRATIONS) == []
    assert migrate(engine, registered()) == []  # "notes" not loaded here
    with pytest.raises(StoreError, match=rf"schema versions \[{n + 1}\]"):
        migrate(engine, [*registered(), Migration(n + 2, "x", sql("SELECT 1"), owner="notes")])


def test_a_failing_migration_leaves_the_store_as_it_was(engine):
    migrate(engine)
    n = max(_versions(registered()))
    broken = [*registered(),
              Migration(n + 1, "good", sql("CREATE TABLE good (id INTEGER PRIMARY KEY)")),
              Migration(n + 2, "bad", sql("CREATE TABLE bad (id INTEGER PRIMARY KEY)", "THIS IS NOT SQL"))]
    with pytest.raises(StoreError, match=f"migration {n + 2} \\(bad\\) failed"):
        migrate(engine, broken)
    assert not {"good", "bad"} & _tables(engine)
    with engine.connect() as conn:
        assert applied_versions(conn) == _versions(registered())


def test_misnumbered_list_is_refused(engine):
    with pytest.raises(StoreError, match="numbered 1, 2, 3"):
        migrate(engine, [MIGRATIONS[0], Migration(1, "twice", sql("SELECT 1"))])
    with pytest.raises(StoreError, match="numbered 1, 2, 3"):
        migrate(engine, [Migration(5, "late", sql("SELECT 1")), MIGRATIONS[0]])


def test_a_version_registered_by_two_owners_is_refused():
    with pytest.raises(StoreError, match="registered twice"):
        register(Migration(1, "mine", sql("SELECT 1"), owner="intruder"))
    register(*MIGRATIONS)  # the same migrations again: a no-op
    assert registered()[0] is MIGRATIONS[0]


def test_a_ledger_from_before_owners_is_upgraded(engine):
    """Stores migrated before owners registered their migrations have no ``owner`` column; their
    daemon rows (named ``daemon: ...``) are recognised as the daemon's."""
    with engine.begin() as conn:  # what an old release left: no owner column at all
        conn.exec_driver_sql("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                             " applied_at BIGINT NOT NULL)")
        conn.exec_driver_sql("INSERT INTO schema_migrations VALUES (1, 'model registry', 0)")
        conn.exec_driver_sql("INSERT INTO schema_migrations VALUES (2, 'daemon: check results', 0)")
    assert migrate(engine, MIGRATIONS) == []
    with engine.connect() as conn:
        owners = dict(conn.exec_driver_sql("SELECT version, owner FROM schema_migrations").all())
    assert owners == {1: "store", 2: "daemon"}


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
    assert sorted(len(r) for r in results) == [0, 0, 0, len(registered())]


def _start_up(url: str, barrier, results) -> None:
    engine = make_engine(url)
    barrier.wait()
    try:
        results.put(len(migrate(engine)))
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        results.put(repr(exc))
    finally:
        engine.dispose()


def _race(url: str, kind: str) -> list:
    """Four start-ups migrating one store at once, as threads or as processes (two daemons)."""
    if kind == "threads":
        import queue
        barrier, results = threading.Barrier(4), queue.Queue()
        workers = [threading.Thread(target=_start_up, args=(url, barrier, results)) for _ in range(4)]
    else:
        ctx = multiprocessing.get_context("fork")
        barrier, results = ctx.Barrier(4), ctx.Queue()
        workers = [ctx.Process(target=_start_up, args=(url, barrier, results)) for _ in range(4)]
    for w in workers:
        w.start()
    got = [results.get(timeout=60) for _ in workers]
    for w in workers:
        w.join(10)
    return got


@pytest.mark.parametrize("kind,round_", [("threads", r) for r in range(50)] + [("processes", r) for r in range(20)])
def test_concurrent_start_ups_on_one_sqlite_file_never_fail(tmp_path, kind, round_):
    """Stress variant of the case above on a fresh SQLite file: the WAL switch and the migrations
    race for real. Before the WAL switch was serialised and retried, about 3 in 100 thread rounds
    failed with "database is locked" (issue 14)."""
    got = _race(f"sqlite:///{tmp_path / 'store.db'}", kind)
    assert sorted(got, key=str) == sorted([0, 0, 0, len(registered())], key=str)
