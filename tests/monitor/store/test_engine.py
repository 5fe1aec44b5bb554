"""The store's lock signal (monitor/store/engine.py): a write that fails for SQLite's lock marks the
engine contended until one gets the lock again, and ``probe_write_lock`` tells, within the bounded
wait and writing nothing, whether it can be had now."""
from __future__ import annotations

import sqlite3

import pytest
import sqlalchemy as sa

from monitor.errors import StoreError
from monitor.store.engine import bounded_wait, lock_contended, make_engine, probe_write_lock, write_transaction


@pytest.fixture
def engine(tmp_path):
    made = make_engine(f"sqlite:///{tmp_path / 'store.db'}", busy_timeout_seconds=30)
    with write_transaction(made) as conn:
        conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
    yield made
    made.dispose()


def test_a_lock_held_elsewhere_marks_the_engine_until_a_write_gets_it(engine, tmp_path):
    assert not lock_contended(engine)
    holder = sqlite3.connect(tmp_path / "store.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with bounded_wait(0.1):
            with pytest.raises(sa.exc.OperationalError):
                with write_transaction(engine) as conn:
                    conn.exec_driver_sql("INSERT INTO t VALUES (1)")
            assert lock_contended(engine)
            with pytest.raises(StoreError, match="locked"):
                probe_write_lock(engine)
        assert lock_contended(engine)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with bounded_wait(0.1):
        probe_write_lock(engine)
    assert not lock_contended(engine)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM t").scalar() == 0


def test_an_error_inside_the_transaction_is_not_a_lock(engine):
    with pytest.raises(sa.exc.OperationalError):
        with write_transaction(engine) as conn:
            conn.exec_driver_sql("INSERT INTO missing VALUES (1)")
    assert not lock_contended(engine)


def test_postgresql_like_engines_are_never_contended():
    assert not lock_contended(sa.create_engine("sqlite://"))  # an engine not made by make_engine: no gate
