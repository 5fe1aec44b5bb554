"""``GpuCollector``: a Prometheus custom collector that reads every GPU on each scrape.

Each scrape builds fresh metric families, so a GPU or a process that is gone is simply absent: no
stale series to clean up. The readings happen on per-GPU lanes (:mod:`monitor.gpu.lanes`) with one
deadline for the whole scrape (``call_timeout_seconds``): a GPU that does not answer in time is left
out of this scrape and counted in ``driftloop_gpu_collection_errors_total``, while the others flow.
Slow or blocking sources (energy, GPM activity, PCIe and NVLink throughput and counters, MIG
instances, XID events) run in background threads (:mod:`monitor.gpu.background`) and the scrape only
reads their cache, serving each GPU's slow readings with their age.

What the families are and how readings become samples is :mod:`monitor.gpu.families`.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Iterator

from prometheus_client.metrics_core import Metric

from monitor.gpu.backend import GpuBackendError, GpuIdentity, GpuLostError, GpuSample, NvmlUnavailableError
from monitor.gpu.families import Families, describe
from monitor.gpu.session import GpuSession

if TYPE_CHECKING:
    from monitor.gpu.background import SlowSampler, XidListener

log = logging.getLogger(__name__)

_TIMED_OUT = object()
_STILL_BUSY = object()


class GpuCollector:
    """Collects GPU metrics from a :class:`GpuSession`. Register it with a ``CollectorRegistry``;
    build it with :func:`monitor.gpu.build_gpu_collector`, which also wires the optional parts."""

    def __init__(self, session: GpuSession, *, call_timeout_seconds: float = 2.0, process_metrics: bool = False,
                 sampler: SlowSampler | None = None, xid: XidListener | None = None, hostname: str | None = None):
        self.session = session
        self.call_timeout = call_timeout_seconds
        self.process_metrics = process_metrics
        self.sampler = sampler
        self.xid = xid
        self.errors: dict[int, int] = {}
        self._hung: dict[int, float] = {}
        self._logged: set[tuple[Any, ...]] = set()
        self._build = Families(hostname)
        self._lock = threading.Lock()
        self._read = self._read_processes if process_metrics else session.backend.sample
        self.last_duration = 0.0

    # -- prometheus_client collector protocol ---------------------------------------------------
    def describe(self) -> list[Metric]:
        """Family names only, so a registry can refuse a duplicate name without running a scrape."""
        return describe()

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        # Concurrent scrapes (two Prometheus replicas) take turns: one may first wait for the other,
        # which holds the lock for one deadline plus building its families. Its own deadline starts
        # once it has the lock, or the wait would read as its GPUs timing out.
        if not self._lock.acquire(timeout=self.call_timeout * 1.5):
            log.warning("an earlier scrape still holds the GPU collector; serving self-metrics only")
            yield from self._families({}, started)
            return
        deadline = time.monotonic() + self.call_timeout
        try:
            self.session.refresh(deadline)
            readings = self._sweep(deadline) if self.session.up else {}
            for index in self.session.lost:  # every scrape a GPU stays lost counts, so the signal persists
                self._count_error(index)
            families = self._families(readings, started)
        finally:
            self._lock.release()
        yield from families

    def health(self) -> dict[str, Any]:
        s = self.session
        return {"nvml_up": s.up, "gpus": sorted(s.gpus), "lost": sorted(s.lost), "not_answering": sorted(self._hung)}

    # -- reading --------------------------------------------------------------------------------
    def _read_processes(self, index: int) -> GpuSample:
        return self.session.backend.sample(index, processes=True)

    def _lookup(self, index: int) -> tuple[GpuIdentity, GpuSample | Exception]:
        """Identify a GPU that is new or was lost, and read it in the same trip to its lane."""
        ident = self.session.backend.identify(index)
        try:
            return ident, self._read(index)
        except Exception as exc:  # the identity stands; the reading is handled like any failed one
            return ident, exc

    def _sweep(self, deadline: float) -> dict[GpuIdentity, GpuSample]:
        """Read every GPU, and look up lost ones that are due, each on its lane, all until ``deadline``."""
        lanes, session = self.session.lanes, self.session
        gpus = session.gpus
        reads, lookups = [], []
        failures: list[tuple[GpuIdentity, Any]] = []
        for ident in gpus.values():
            ticket = lanes[ident.index].submit(self._read, ident.index)
            if ticket is None:
                failures.append((ident, _STILL_BUSY))
            else:
                reads.append((ident, ticket))
        for index in session.due_lookups():
            ticket = lanes[index].submit(self._lookup, index)
            if ticket is not None:
                lookups.append((index, ticket))
        results: list[tuple[GpuIdentity, Any]] = []
        for ident, ticket in reads:
            if ticket.wait(deadline - time.monotonic()):
                results.append((ident, ticket.error if ticket.error is not None else ticket.value))
            else:
                results.append((ident, _TIMED_OUT))
        for index, ticket in lookups:
            if not ticket.wait(deadline - time.monotonic()):
                session.lookup_failed(index, None)
            elif ticket.error is not None:
                session.lookup_failed(index, ticket.error)
                if not session.up:
                    return {}
            else:
                ident, outcome = ticket.value
                session.found(index, ident)
                results.append((ident, outcome))
        readings: dict[GpuIdentity, GpuSample] = {}
        for ident, outcome in results:
            if not isinstance(outcome, GpuSample):
                failures.append((ident, outcome))
                continue
            readings[ident] = outcome
            if outcome.field_errors:
                self._count_error(ident.index)
                self._log_once(("field", ident.index, outcome.field_errors), logging.WARNING,
                               "GPU %d: could not read %s (left out; see DEBUG logs)", ident.index,
                               ", ".join(outcome.field_errors))
            if ident.index in self._hung:
                since = self._hung.pop(ident.index)
                log.info("GPU %d answers again after %.1f s", ident.index, time.monotonic() - since)
        for index in [i for i in self._hung if i not in session.gpus]:  # no longer readable at all
            del self._hung[index]
        for ident, failure in failures:
            if self._failed(ident, failure):  # NVML as a whole is gone: nothing from this scrape is trusted
                return {}
        return readings

    def _failed(self, ident: GpuIdentity, failure: Any) -> bool:
        index = ident.index
        if not isinstance(failure, GpuLostError):  # a lost GPU is counted with the others still lost
            self._count_error(index)
        if failure is _TIMED_OUT or failure is _STILL_BUSY:
            if index not in self._hung:
                self._hung[index] = time.monotonic()
                log.warning("GPU %d (%s) did not answer within %g s; its series are left out until it does",
                            index, ident.uuid, self.call_timeout)
        elif isinstance(failure, NvmlUnavailableError):
            self.session.mark_down(failure)
            return True
        elif isinstance(failure, GpuLostError):
            self.session.mark_lost(index, failure)
        elif isinstance(failure, GpuBackendError):
            self._log_once(("error", index, str(failure)), logging.WARNING, "GPU %d: %s", index, failure)
        else:  # a bug, not a GPU problem: keep scraping, but show where it is
            self._log_once(("bug", index, type(failure)), logging.ERROR, "reading GPU %d failed unexpectedly",
                           index, exc_info=failure)
        return False

    def _count_error(self, index: int) -> None:
        self.errors[index] = self.errors.get(index, 0) + 1

    def _log_once(self, key: tuple[Any, ...], level: int, msg: str, *args: Any, exc_info: Any = None) -> None:
        if key in self._logged:
            log.debug(msg, *args)
            return
        if len(self._logged) > 10_000:  # messages with changing text must not grow this forever
            self._logged.clear()
        self._logged.add(key)
        log.log(level, msg, *args, exc_info=exc_info)

    # -- families -------------------------------------------------------------------------------

    def _families(self, readings: dict[GpuIdentity, GpuSample], started: float) -> list[Metric]:
        session = self.session
        slow = self.sampler.snapshot() if self.sampler is not None else None
        families = self._build.gpus(readings, session.driver, self.process_metrics, slow)
        if self.xid is not None:
            families += self._build.xid(self.xid.counts(), session.uuids)
        self.last_duration = time.perf_counter() - started
        return families + self._build.own(session.up, self.errors, session.uuids, self.last_duration)
