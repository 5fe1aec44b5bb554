"""Liveness and readiness, for ``/livez``, ``/readyz`` (``/healthz`` is its alias) and the
``driftloop_store_writable`` gauge.

Live means the process answers HTTP. Ready means it can do its job now: each named check (the
store can take a write; the daemon adds MLflow) raises :class:`~monitor.errors.DriftloopError`
with the reason when it cannot, kept as a :class:`Failure`: its kind for anyone, its reason
(paths, URLs) for the log and callers with the token. ``/readyz`` always asks afresh, but waits
for the round under a second (:func:`Readiness.results_within`) and then says not ready; scrapes
take an answer up to ``ttl`` seconds old. Checks run one round at a time (a lock), so a locked store
holds one round for its busy timeout, not one per caller, and no caller holds a thread meanwhile.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import anyio

from monitor.errors import DriftloopError, Outage
from monitor.writable import WriteProblem

log = logging.getLogger(__name__)

Check = Callable[[], None]


@dataclass(frozen=True)
class Failure:
    """Why a readiness check failed: ``kind`` for anyone, ``reason`` for the log and trusted callers."""
    kind: Outage
    reason: str


class SpaceGuard:
    """``store.min_free_bytes`` enforced at ingest: ``problem()`` is the reason the store's
    filesystem cannot take a batch (read-only, or below the threshold), or None. The probe (one
    ``statvfs``) is asked at most once per ``ttl`` seconds while the answer is "fine", so a burst of
    batches does not pay it each: a disk that fills is refused within ``ttl``. While it is not fine
    every batch asks again (a refusal is cheap), so a freed disk takes the next batch."""

    def __init__(self, probe: Callable[[], WriteProblem | None], ttl: float = 1.0,
                 clock: Callable[[], float] = time.monotonic):
        self._probe = probe
        self._ttl = ttl
        self._clock = clock
        self._cached: tuple[float, WriteProblem | None] | None = None

    def problem(self) -> WriteProblem | None:
        now = self._clock()
        cached = self._cached
        if cached is not None and cached[1] is None and now - cached[0] < self._ttl:
            return None
        try:
            reason = self._probe()
        except Exception as exc:  # the write itself will say what is wrong, if anything
            log.warning("free-space probe failed: %s", exc)
            reason = None
        self._cached = (now, reason)
        return reason


@dataclass
class _Round:
    """One round of checks under way: who to wake when it is done."""
    done: bool = False
    waiters: list[Callable[[], None]] = field(default_factory=list)


class Readiness:
    def __init__(self, checks: dict[str, Check] | None = None, ttl: float = 2.0,
                 clock: Callable[[], float] = time.monotonic):
        self._checks: dict[str, Check] = dict(checks or {})
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: tuple[float, dict[str, Failure | None]] | None = None
        self._refreshing = threading.Event()
        self._round_lock = threading.Lock()
        self._round: _Round | None = None

    def add(self, name: str, check: Check) -> None:
        with self._lock:
            self._checks[name] = check
            self._cached = None

    def results(self, max_age: float | None = None) -> dict[str, Failure | None]:
        """``{check: None when fine, else its Failure}``, at most ``max_age`` seconds old (default
        ``ttl``; 0 for a fresh answer)."""
        max_age = self._ttl if max_age is None else max_age
        with self._lock:
            now = self._clock()
            if self._cached is not None and now - self._cached[0] < max_age:
                return self._cached[1]
            out: dict[str, Failure | None] = {}
            for name, check in self._checks.items():
                try:
                    check()
                    out[name] = None
                except DriftloopError as exc:
                    out[name] = Failure(exc.kind or Outage.UNREACHABLE, str(exc))
                except Exception as exc:  # a check that breaks says not ready rather than 500
                    log.exception("readiness check %s failed unexpectedly", name)
                    out[name] = Failure(Outage.UNREACHABLE, f"{type(exc).__name__}: {exc}")
            previous = self._cached[1] if self._cached else {}
            for name, failure in out.items():
                if failure is not None and previous.get(name) != failure:
                    log.warning("not ready: %s: %s", name, failure.reason)
            self._cached = (self._clock(), out)
            return out

    async def results_within(self, wait: float) -> dict[str, Failure | None]:
        """A fresh round of checks (one at a time: joins a round already running), waited for at
        most ``wait`` seconds on the event loop, holding no thread and not polling (the round wakes
        its waiters: a crowd of probes costs nothing while the store is locked); a round still
        running then answers every check "no answer within ``wait`` s" (a store locked or slow is
        not ready)."""
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()

        def settle() -> None:
            if not woken.done():
                woken.set_result(None)

        def wake() -> None:
            loop.call_soon_threadsafe(settle)

        with self._round_lock:
            if self._round is None:
                self._round = _Round()
                threading.Thread(target=self._run_round, args=(self._round,), name="readiness-round",
                                 daemon=True).start()
            current = self._round
            current.waiters.append(wake)
        with anyio.move_on_after(wait):
            await woken
        cached = self._cached
        if current.done and cached is not None:
            return cached[1]
        return {name: Failure(Outage.NO_ANSWER, f"no answer within {wait:g} s (locked or slow; the check goes on "
                                                "in the background)")
                for name in self._checks}

    def _run_round(self, current: "_Round") -> None:
        try:
            self.results(max_age=0)
        finally:
            with self._round_lock:
                self._round = None
                current.done = True
                waiters = list(current.waiters)
            for wake in waiters:
                try:
                    wake()
                except RuntimeError:  # that waiter's event loop is closed: nobody to wake
                    pass

    def ok(self, name: str) -> bool | None:
        """Whether check ``name`` passed (None when there is no such check), without waiting on a
        slow check: an answer older than ``ttl`` is returned while a fresh one is worked out in the
        background (a scrape must not hang for a locked store's busy timeout). The first call waits."""
        cached = self._cached
        if cached is None:
            results = self.results()
        else:
            results = cached[1]
            if self._clock() - cached[0] >= self._ttl and not self._refreshing.is_set():
                self._refreshing.set()
                threading.Thread(target=self._refresh, name="readiness", daemon=True).start()
        return None if name not in results else results[name] is None

    def _refresh(self) -> None:
        try:
            self.results(max_age=0)
        finally:
            self._refreshing.clear()
