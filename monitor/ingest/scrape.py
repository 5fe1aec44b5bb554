"""``/metrics`` that never waits on the store for long.

Collectors read the store (row counts, the daemon's counters derived from its tables). A locked or
unreachable store must not hold a scrape past Prometheus's timeout, nor tie up the threads every
other request needs. :class:`Snapshots` collects the registry in its own thread, one collection at
a time; a scrape waits for it at most ``wait`` seconds and otherwise serves the last complete
collection. ``driftloop_store_stats_age_seconds`` says how old the served values are (milliseconds
when this scrape collected them), so a stale answer is visible and alertable instead of silent.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Iterable

import anyio
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric

log = logging.getLogger(__name__)

AGE_METRIC = "driftloop_store_stats_age_seconds"


class _Served:
    """What the encoders read: a registry-like object with the snapshot's families and the age."""

    def __init__(self, families: list[Metric], age: Metric):
        self._families = families
        self._age = age

    def collect(self) -> Iterable[Metric]:
        yield from self._families
        yield self._age


class Snapshots:
    def __init__(self, registry: CollectorRegistry, model: str | Callable[[], Iterable[str]], wait: float = 0.5,
                 clock: Callable[[], float] = time.monotonic):
        """``model``: the model the age is labelled with, or (a deployment of many) a function
        giving them all."""
        self._registry = registry
        self._models = (lambda: (model,)) if isinstance(model, str) else model
        self._wait = wait
        self._clock = clock
        self._lock = threading.Lock()
        self._last: tuple[float, list[Metric]] | None = None
        self._running: threading.Event | None = None
        self._started = clock()

    def _start(self) -> threading.Event:
        """The collection in progress, or a new one."""
        with self._lock:
            if self._running is None:
                done = threading.Event()
                self._running = done
                threading.Thread(target=self._collect, args=(done,), name="metrics-collect", daemon=True).start()
            return self._running

    def _collect(self, done: threading.Event) -> None:
        try:
            at = self._clock()
            families = list(self._registry.collect())
            with self._lock:
                self._last = (at, families)
        except Exception:  # a broken collector: keep serving the last collection
            log.exception("metrics collection failed")
        finally:
            with self._lock:
                self._running = None
            done.set()

    async def current(self) -> _Served:
        """The registry's families, fresh when a collection finishes within ``wait`` seconds,
        else the last complete one; never waits longer (polls on the event loop, holds no thread)."""
        done = self._start()
        deadline = self._clock() + self._wait
        while not done.is_set() and self._clock() < deadline:
            await anyio.sleep(0.005)
        with self._lock:
            last = self._last
        now = self._clock()
        age = GaugeMetricFamily(AGE_METRIC, "Seconds since the served metric values were collected (milliseconds "
                                "when by this scrape). Grows while collection, which reads the store, does not finish "
                                "within "
                                f"{self._wait:g} s: the store is locked or slow.", labels=["model"])
        models = list(self._models())
        if last is None:
            for model in models:
                age.add_metric([model], now - self._started)
            return _Served([], age)
        for model in models:
            age.add_metric([model], round(max(0.0, now - last[0]), 3))
        return _Served(last[1], age)
