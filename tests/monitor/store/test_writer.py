"""Group commit (monitor/store/writer.py) on real stores: batches queued while the writer is busy go
in one transaction, a failing batch does not sink the others of its group, a store that cannot be
written fails every queued caller promptly, and no acknowledged batch is lost to a kill -9."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from monitor.errors import ConflictError, StoreError
from monitor.store import PredictionStore
from monitor.store.writer import BatchWriter
from tests.monitor.store.factories import prediction, predictions, small_model
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[3]


class Held:
    """Keeps a writer's thread busy inside a transaction until released, so callers queue up."""

    def __init__(self, writer: BatchWriter):
        self.writer = writer
        self.started, self.release = threading.Event(), threading.Event()

        def block(conn: Any) -> int:
            self.started.set()
            assert self.release.wait(30)
            return 0

        self.thread = threading.Thread(target=writer.write, args=(block,))
        self.thread.start()
        assert self.started.wait(30)

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.thread.join(30)

    def __enter__(self) -> "Held":
        return self


def in_threads(calls: list[Callable[[], Any]], writer: BatchWriter) -> list[Any]:
    """Run each call in its own thread while ``writer`` is held, each started once the one before
    has queued (so the queue's order is the calls' order); once all are queued, release it.
    Returns each call's result or exception, in order."""
    out: list[Any] = [None] * len(calls)

    def run(k: int) -> None:
        try:
            out[k] = calls[k]()
        except Exception as exc:  # noqa: BLE001 - returned to the test
            out[k] = exc

    with Held(writer):
        threads = [threading.Thread(target=run, args=(k,)) for k in range(len(calls))]
        for k, t in enumerate(threads):
            t.start()
            wait_until(lambda k=k: writer.queued == k + 1, 30, message=f"batch {k} did not queue up")
    for t in threads:
        t.join(60)
    return out


def test_queued_batches_share_one_transaction_with_exact_counts(store):
    groups = store.writer.groups
    # The second batch re-sends two ids of the first (same content): duplicates, inside one group.
    batches = [predictions(50, prefix="a"), predictions(50, prefix="a", start=48), predictions(30, prefix="b")]
    results = in_threads([lambda b=b: store.add_predictions(b) for b in batches], store.writer)
    assert [r.to_dict() for r in results] == [{"stored": 50, "duplicates": 0}, {"stored": 48, "duplicates": 2},
                                              {"stored": 30, "duplicates": 0}]
    assert store.writer.groups == groups + 1
    assert store.row_counts()["predictions"] == 128


def test_a_conflicting_batch_does_not_sink_the_others_of_its_group(store):
    store.add_predictions([prediction(0, prefix="old")])
    conflicting = predictions(20, prefix="new") + [prediction(0, prefix="old", score=0.99)]
    calls = [lambda: store.add_predictions(predictions(40, prefix="p")),
             lambda: store.add_predictions(conflicting),
             lambda: store.add_labels([{"id": "p1", "label": 1}]),
             lambda: store.add_predictions(predictions(10, prefix="q"))]
    first, second, label, last = in_threads(calls, store.writer)
    assert isinstance(second, ConflictError)
    assert [e["index"] for e in second.errors] == [20]  # the error is still this batch's own
    assert first.stored == 40 and label.stored == 1 and last.stored == 10
    ids = set(store.window()["id"])
    assert len(ids) == 51 and not any(i.startswith("new") for i in ids)  # the conflicting batch: nothing


def test_a_locked_store_fails_every_caller_and_the_writer_recovers(open_sqlite_store):
    store = open_sqlite_store(busy_timeout_seconds=0.3)
    store.add_predictions(predictions(1, prefix="w"))  # creates the file and the writer
    holder = sqlite3.connect(store.engine.url.database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process, as far as our writer knows
    out: list[Any] = [None] * 3

    def call(k: int) -> None:
        try:
            out[k] = store.add_predictions(predictions(5, prefix=f"l{k}"))
        except StoreError as exc:
            out[k] = exc

    try:
        threads = [threading.Thread(target=call, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert all(isinstance(r, StoreError) and "locked" in str(r) for r in out), out
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert store.add_predictions(predictions(5, prefix="after")).stored == 5
    assert store.row_counts()["predictions"] == 6


def test_an_error_in_a_batch_reaches_its_caller_and_the_writer_goes_on(open_sqlite_store):
    store = open_sqlite_store()

    def broken(conn: Any) -> int:
        raise RuntimeError("a bug in the caller's work")

    with pytest.raises(RuntimeError, match="a bug"):
        store.writer.write(broken)
    assert store.add_predictions(predictions(3)).stored == 3
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.add_predictions(predictions(3, prefix="late"))


_WRITER_CHILD = textwrap.dedent("""
    import sys, threading
    from monitor.store import PredictionStore
    from tests.monitor.store.factories import predictions, small_model
    store = PredictionStore(sys.argv[1], small_model())
    lock = threading.Lock()
    def run(w):
        for b in range(1000):
            store.add_predictions(predictions(200, prefix=f"w{w}b{b}-"))
            with lock:  # acknowledged: the call returned, so its transaction committed
                print(f"w{w}b{b}-", flush=True)
    for w in range(4):
        threading.Thread(target=run, args=(w,)).start()
""")


def test_kill_9_loses_no_acknowledged_batch_and_splits_none(tmp_path):
    url = f"sqlite:///{tmp_path / 'kill.db'}"
    child = subprocess.Popen([sys.executable, "-c", _WRITER_CHILD, url], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    acked: list[str] = []
    try:
        assert child.stdout is not None
        while len(acked) < 40:
            line = child.stdout.readline()
            assert line, "the writer child exited early"
            acked.append(line.strip())
        child.send_signal(signal.SIGKILL)
        acked += [line.strip() for line in child.stdout]  # acknowledged before the kill landed
    finally:
        child.kill()
        child.wait(30)
    with PredictionStore(url, small_model()) as store:
        ids = list(store.window()["id"])
    per_batch: dict[str, int] = {}
    for rid in ids:
        per_batch[rid.rsplit("-", 1)[0] + "-"] = per_batch.get(rid.rsplit("-", 1)[0] + "-", 0) + 1
    assert set(acked) <= set(per_batch)                       # no acknowledged batch lost
    assert set(per_batch.values()) == {200}                   # every batch whole or absent
    assert len(ids) == len(set(ids))
