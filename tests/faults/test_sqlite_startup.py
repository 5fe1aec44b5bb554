"""The SQLite start-up race: connections opening a fresh file together all switch it to WAL.
Before the fix, ``PRAGMA journal_mode=WAL`` failed with SQLITE_BUSY at once (the busy handler does
not cover it) in about 1 of 20 fresh files."""
from __future__ import annotations

import sqlite3
import threading

from monitor.store.engine import make_engine

ITERATIONS = 200
THREADS = 8


def test_fresh_file_opened_by_many_threads_at_once(tmp_path):
    failures: list[str] = []
    for i in range(ITERATIONS):
        url = f"sqlite:///{tmp_path / f'fresh-{i}.db'}"
        engines = [make_engine(url, busy_timeout_seconds=5) for _ in range(THREADS)]
        barrier = threading.Barrier(THREADS)

        def open_one(engine) -> None:
            barrier.wait()
            try:
                with engine.connect() as conn:
                    conn.exec_driver_sql("SELECT 1")
            except Exception as exc:  # noqa: BLE001 - every failure is reported below
                failures.append(f"iteration {i}: {exc}")

        threads = [threading.Thread(target=open_one, args=(e,)) for e in engines]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        for e in engines:
            e.dispose()
        with sqlite3.connect(tmp_path / f"fresh-{i}.db") as check:
            assert check.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert not failures, f"{len(failures)}/{ITERATIONS} iterations failed: {failures[:3]}"
