"""NVML's life inside the exporter: initialise once, back off while it is missing, drop a GPU that is
lost and look for it again.

The exporter must start and serve ``driftloop_gpu_up 0`` on a machine whose driver is not (yet)
loaded, say so once in the log, and pick NVML up when it appears, without a restart. A GPU that falls
off the bus (XID 79) answers ``GPU is lost`` from then on; its series go, and it is looked up again
with the same backoff in case a reset brings it back. Every NVML call runs on a lane (initialisation
here; GPU lookups in the collector, next to its readings), so a hung driver costs a scrape at most its
deadline. Right after initialisation every GPU is "lost" in this sense, until its first lookup.

``gpus`` and ``lost`` are replaced, never mutated, so background threads may read them without a lock.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable

from monitor.gpu.backend import DriverInfo, GpuBackend, GpuBackendError, GpuIdentity, NvmlUnavailableError
from monitor.gpu.lanes import Lanes, Ticket

log = logging.getLogger(__name__)

INIT_LANE = "init"


class Backoff:
    """Exponential backoff on an injected clock: ``initial``, doubling, capped at ``maximum``."""

    def __init__(self, initial: float, maximum: float, now: float = float("-inf")):
        self.initial = initial
        self.maximum = max(initial, maximum)
        self.delay = initial
        self.due = now  # first attempt is due at once
        self.failures = 0

    def failed(self, now: float) -> float:
        """Record a failure at ``now``; return the delay until the next attempt."""
        delay = self.delay
        self.due = now + delay
        self.delay = min(delay * 2, self.maximum)
        self.failures += 1
        return delay


@dataclass
class _Lost:
    """A GPU not (or no longer) readable: looked up on its own lane with backoff."""
    reason: str
    backoff: Backoff
    seen: bool  # False: never identified since NVML was initialised


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


class GpuSession:
    def __init__(self, backend: GpuBackend, *, lanes: Lanes | None = None, clock: Callable[[], float] = time.monotonic,
                 retry_initial_seconds: float = 1.0, retry_max_seconds: float = 60.0):
        self.backend = backend
        self.lanes = lanes if lanes is not None else Lanes()
        self._clock = clock
        self._retry = (retry_initial_seconds, retry_max_seconds)
        self.up = False
        self.driver: DriverInfo | None = None
        self.gpus: dict[int, GpuIdentity] = {}
        self.lost: dict[int, _Lost] = {}
        self.uuids: dict[int, str] = {}  # every GPU ever identified, for series that outlive a loss
        self.generation = 0  # bumped whenever the set of readable GPUs grows (XID watchers re-register)
        self.init_attempts = 0
        self._init_backoff = Backoff(*self._retry)
        self._init_pending: Ticket | None = None
        self._init_hung_logged = False

    # -- called by the collector on each scrape -------------------------------------------------
    def refresh(self, deadline: float) -> None:
        """Initialise NVML if it is not and a retry is due; wait at most until ``deadline``
        (a ``time.monotonic()`` value)."""
        if not self.up:
            self._connect(deadline)

    def mark_lost(self, index: int, exc: BaseException) -> None:
        if index not in self.gpus:
            return
        ident = self.gpus[index]
        self.gpus = {i: g for i, g in self.gpus.items() if i != index}
        backoff = Backoff(*self._retry)
        backoff.failed(self._clock())
        self.lost = {**self.lost, index: _Lost(_describe(exc), backoff, seen=True)}
        log.warning("GPU %d (%s) is lost: %s; its series are dropped and it is looked for again every %g-%g s",
                    index, ident.uuid, _describe(exc), *self._retry)

    def mark_down(self, exc: BaseException) -> None:
        """NVML itself went away mid-run (driver unloaded): serve up 0 and re-initialise with backoff."""
        if not self.up:
            return
        self.up = False
        self.gpus, self.lost = {}, {}
        self._init_backoff = Backoff(*self._retry)
        self._init_backoff.failed(self._clock())
        log.warning("NVML stopped answering (%s); serving driftloop_gpu_up 0 and re-initialising with backoff",
                    _describe(exc))

    # -- internals ------------------------------------------------------------------------------
    def _connect_now(self) -> tuple[DriverInfo, int]:
        # Only what concerns NVML as a whole; each GPU is then identified on its own lane, so one GPU
        # that hangs at start-up does not keep the others from being served.
        return self.backend.init(), self.backend.device_count()

    def _connect(self, deadline: float) -> None:
        ticket = self._init_pending
        if ticket is None:
            if self._clock() < self._init_backoff.due:
                return
            ticket = self.lanes[INIT_LANE].submit(self._connect_now)
            if ticket is None:  # an earlier attempt is still stuck inside NVML
                return
            self.init_attempts += 1
            self._init_pending = ticket
        if not ticket.wait(deadline - time.monotonic()):
            if not self._init_hung_logged:
                self._init_hung_logged = True
                log.warning("NVML initialisation has not answered yet; serving driftloop_gpu_up 0 until it does")
            return
        self._init_pending = None
        self._init_hung_logged = False
        if ticket.error is not None:
            self._connect_failed(ticket.error)
            return
        driver, count = ticket.value
        self.driver, self.gpus, self.up = driver, {}, True
        self.lost = {i: _Lost("not identified yet", Backoff(*self._retry), seen=False) for i in range(count)}
        self.generation += 1
        self._init_backoff = Backoff(*self._retry)
        after = f" after {self.init_attempts} attempts" if self.init_attempts > 1 else ""
        log.info("NVML ready%s: driver %s, CUDA %s, %d GPU(s)", after, driver.driver_version,
                 driver.cuda_driver_version or "unknown", count)
        self.init_attempts = 0

    def _connect_failed(self, exc: BaseException) -> None:
        delay = self._init_backoff.failed(self._clock())
        if not isinstance(exc, GpuBackendError):
            # Not a translated NVML error: a bug in a backend. Keep serving, but show the traceback.
            log.error("GPU backend initialisation failed unexpectedly", exc_info=exc)
        elif self._init_backoff.failures == 1:
            # One clear line; retries are at DEBUG so a GPU-less machine does not fill its log.
            log.warning("NVML unavailable (%s): serving driftloop_gpu_up 0, retrying in %g s, backing off to %g s",
                        _describe(exc), delay, self._init_backoff.maximum)
        else:
            log.debug("NVML still unavailable (%s); next attempt in %g s", _describe(exc), delay)

    # -- looking GPUs up (the collector runs the lookups on the GPUs' lanes, with its readings) --
    def due_lookups(self) -> list[int]:
        """GPUs not readable now whose next lookup is due (all of them right after initialisation)."""
        now = self._clock()
        return [i for i, entry in self.lost.items() if now >= entry.backoff.due]

    def found(self, index: int, ident: GpuIdentity) -> None:
        entry = self.lost.get(index)
        self.lost = {i: e for i, e in self.lost.items() if i != index}
        self.gpus = {**self.gpus, index: ident}
        self.uuids = {**self.uuids, index: ident.uuid}
        self.generation += 1
        if entry is not None and entry.seen:
            log.info("GPU %d (%s) answers again", index, ident.uuid)

    def lookup_failed(self, index: int, exc: BaseException | None) -> None:
        """``exc`` None: the lookup did not answer in time."""
        if isinstance(exc, NvmlUnavailableError):
            self.mark_down(exc)
            return
        entry = self.lost.get(index)
        if entry is None:
            return
        reason = _describe(exc) if exc is not None else "did not answer in time"
        if exc is not None and not isinstance(exc, GpuBackendError):
            log.error("looking up GPU %d failed unexpectedly", index, exc_info=exc)
        elif not entry.seen and entry.backoff.failures == 0:
            log.warning("GPU %d cannot be read (%s); it is looked for again every %g-%g s", index, reason,
                        *self._retry)
        entry.reason = reason
        entry.backoff.failed(self._clock())
