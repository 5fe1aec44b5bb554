"""Group commit: one thread per store writes the batches that callers hand it, several per transaction.

Why: eight clients each committing its own 1,000-row batch meant eight fsyncs and eight threads
queuing for SQLite's write lock (whose busy handler polls with sleeps of up to 100 ms), and a thread
that gives the GIL back for every row it inserts waits behind whichever thread picked it up. Under
load the writer thread instead takes every batch that arrived while it was busy and writes them in
one transaction: one lock, one commit, one fsync for the lot; a lone batch still goes at once.

Durability is unchanged: :meth:`BatchWriter.write` returns only after the transaction holding the
caller's batch has committed, so nothing is acknowledged before it is durable, and a crash before
the commit loses only batches nobody was told were stored. Errors stay per batch: if any batch of
a group fails (a conflict, a bad row) or the group's commit fails, the group is rolled back and each
of its batches is written again alone, in order, so each caller gets its own result or error. A
failure to begin (the store locked beyond the wait, or down) is every caller's and is not retried.

Bounded waits follow the callers: a group is written in the context (``contextvars``) of its oldest
caller, so a wait bound set for request paths (:func:`monitor.store.engine.bounded_wait`) holds for
the transaction that carries the request's batch.
"""
from __future__ import annotations

import contextvars
import os
import threading
from collections import deque
from contextlib import AbstractContextManager
from typing import Any, Callable, Generic, TypeVar

from sqlalchemy.engine import Connection

from monitor.errors import DriftloopError, StoreError

T = TypeVar("T")
# Rows per group: enough to share one commit among many concurrent batches, few enough that a group
# holds SQLite's write lock for a fraction of a second.
MAX_GROUP_ROWS = 20_000


class _Job(Generic[T]):
    __slots__ = ("work", "rows", "context", "done", "result", "error")

    def __init__(self, work: Callable[[Connection], T], rows: int):
        self.work = work
        self.rows = rows
        self.context = contextvars.copy_context()
        self.done = threading.Event()
        self.result: T | None = None
        self.error: BaseException | None = None

    def finish(self, result: Any = None, error: BaseException | None = None) -> None:
        self.result, self.error = result, error
        self.done.set()


class _BeginFailed(DriftloopError):  # internal: never leaves the writer (its cause is what callers get)
    def __init__(self, cause: BaseException):
        super().__init__(str(cause))
        self.cause = cause


class BatchWriter:
    """Runs ``work(conn)`` callables in write transactions opened by ``transaction()``, grouping the
    ones that queue up while a transaction is under way (at most ``max_rows`` rows per group, by the
    callers' own counts). The thread starts on the first write and ends with :meth:`close`."""

    def __init__(self, transaction: Callable[[], AbstractContextManager[Connection]], *,
                 max_rows: int = MAX_GROUP_ROWS, name: str = "driftloop-store-writer"):
        self._transaction = transaction
        self._max_rows = max_rows
        self._name = name
        self._pending: deque[_Job[Any]] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._pid = os.getpid()
        self.groups = 0  # transactions committed with more than one batch (tests, logs)

    def write(self, work: Callable[[Connection], T], rows: int = 1) -> T:
        """``work(conn)``'s result once its transaction has committed; its exception (or the
        transaction's) otherwise. Must not be called from ``work`` itself."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("BatchWriter.write called from its own writer thread")
        job: _Job[T] = _Job(work, rows)
        with self._cond:
            if self._closed:
                raise StoreError("the store is closed")
            if self._pid != os.getpid():  # a forked child: its parent's thread did not come along
                self._thread, self._pending, self._pid = None, deque(), os.getpid()
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            self._pending.append(job)
            self._cond.notify()
        job.done.wait()
        if job.error is not None:
            raise job.error
        return job.result  # type: ignore[return-value]

    @property
    def queued(self) -> int:
        """Batches waiting for the writer thread (not counting the group it is writing)."""
        with self._cond:
            return len(self._pending)

    def close(self, timeout: float = 60.0) -> None:
        """Write what is queued, then stop the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    # ---- the writer thread --------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    return
                group = [self._pending.popleft()]
                rows = group[0].rows
                while self._pending and rows + self._pending[0].rows <= self._max_rows:
                    rows += self._pending[0].rows
                    group.append(self._pending.popleft())
            try:
                self._write(group)
            except BaseException as exc:  # noqa: BLE001 - a bug here must not leave callers waiting
                for job in group:
                    if not job.done.is_set():
                        job.finish(error=exc)
            # Not held while waiting for the next write: the batches and their rows (~50 MiB for
            # 100k records) would stay alive until then.
            del group

    def _write(self, group: list[_Job[Any]]) -> None:
        if len(group) == 1:
            job = group[0]
            try:
                job.finish(job.context.run(self._alone, job))
            except _BeginFailed as exc:
                job.finish(error=exc.cause)
            except Exception as exc:  # noqa: BLE001 - the caller's to handle
                job.finish(error=exc)
            return
        try:
            results = group[0].context.run(self._together, group)
        except _BeginFailed as exc:  # the store cannot be written at all: the same answer for all
            for job in group:
                job.finish(error=exc.cause)
            return
        except Exception:  # noqa: BLE001 - one batch (or the commit) failed: each alone, for its own answer
            for job in group:
                self._write([job])
            return
        self.groups += 1
        for job, result in zip(group, results):
            job.finish(result)

    def _together(self, group: list[_Job[Any]]) -> list[Any]:
        with self._begin() as conn:
            return [job.work(conn) for job in group]

    def _alone(self, job: _Job[Any]) -> Any:
        with self._begin() as conn:
            return job.work(conn)

    def _begin(self) -> AbstractContextManager[Connection]:
        return _Guarded(self._transaction())


class _Guarded(AbstractContextManager):
    """A transaction whose failure to begin is told apart (``_BeginFailed``) from a failure inside it."""

    def __init__(self, manager: AbstractContextManager[Connection]):
        self._manager = manager

    def __enter__(self) -> Connection:
        try:
            return self._manager.__enter__()
        except Exception as exc:
            raise _BeginFailed(exc) from exc

    def __exit__(self, *exc: Any) -> bool | None:
        return self._manager.__exit__(*exc)
