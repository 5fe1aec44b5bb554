"""Sources too slow or too blocking for the scrape path, each in one background thread.

* :class:`SlowSampler` — the readings that cost milliseconds or need two samples over time: energy
  (3.1 ms of a 3.8 ms H200 collection), GPM activity (averages between two samples), PCIe and NVLink
  throughput (NVML's legacy PCIe counter samples ~20 ms per direction per GPU), NVLink and
  remapped-row counters, MIG instances. It reads every GPU every ``interval`` seconds and the scrape
  serves its cache with the reading's age; a reading older than three intervals is dropped, not
  served stale. One thread for all GPUs: a GPU that hangs stops the slow readings of the others too
  (their age grows and then they go), while the scrape path, on its lanes, is not held. GPM needs a
  second sample for its first ratios, so after a pass that left a GPU's GPM with only its first
  sample (start-up, a GPU found again) the next pass comes ``FOLLOW_UP_SECONDS`` later, not an
  interval later; :meth:`SlowSampler.wait_primed` lets start-up wait (bounded) for those first
  passes, so the first scrape serves energy and the GPM ratios too.
* :class:`XidListener` — XID errors arrive as NVML events; the listener blocks in
  ``nvmlEventSetWait`` and counts them per GPU and XID code.

Both read the session's GPU set (replaced, never mutated, so no lock is needed) and re-register
when it changes. One thread each, whatever NVML does: a hung call holds that thread only.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from monitor.gpu.backend import GpuBackend, GpuBackendError, NvmlUnavailableError, SlowSample
from monitor.gpu.session import GpuSession

log = logging.getLogger(__name__)

# Past GPM's 0.1 s minimum window (monitor.gpu.gpm.MIN_WINDOW_SECONDS), short enough for start-up to wait.
FOLLOW_UP_SECONDS = 0.25

# What an operator should read when one of these shows up (NVIDIA's XID catalogue, shortened).
XID_MEANING = {
    13: "graphics engine exception (often an application bug)",
    31: "GPU memory page fault (often an application bug)",
    43: "GPU stopped processing",
    45: "preemptive cleanup after an earlier error",
    48: "double-bit ECC error: drain the node",
    63: "ECC page retirement or row remapping event",
    64: "ECC page retirement or row remapper failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus: the node needs attention",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error: reset the GPU",
    119: "GSP RPC timeout",
    120: "GSP error",
}


class _Worker:
    def __init__(self, name: str):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _loop(self) -> None:
        try:
            self.run()
        except Exception:  # a bug: say so loudly, the scrape path keeps working without this source
            log.exception("%s stopped", self._thread.name)

    def run(self) -> None:
        raise NotImplementedError


class SlowSampler(_Worker):
    def __init__(self, backend: GpuBackend, session: GpuSession, interval_seconds: float = 5.0, *,
                 pcie_throughput: bool = False, clock: Callable[[], float] = time.monotonic):
        super().__init__("gpu-slow-sampler")
        self.backend = backend
        self.session = session
        self.interval = interval_seconds
        self.pcie_throughput = pcie_throughput
        self._clock = clock
        self._cache: dict[int, tuple[float, SlowSample]] = {}
        self._logged: set[tuple[int, tuple[str, ...]]] = set()
        self._primed = threading.Event()

    def wait_primed(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a pass that left no GPU waiting for its first GPM window
        (the thread must be started). False on timeout: a GPU hangs, or NVML is slow to answer."""
        return self._primed.wait(timeout)

    def snapshot(self) -> dict[int, tuple[float, SlowSample]]:
        """``{GPU index: (age in seconds, reading)}`` for readings no older than three intervals."""
        now = self._clock()
        oldest = now - 3 * self.interval
        return {i: (now - at, s) for i, (at, s) in list(self._cache.items()) if at >= oldest}

    def sample_once(self) -> bool:
        """One pass over every GPU; True when a GPU's GPM has its first sample only (come back soon)."""
        pending = False
        gpus = self.session.gpus if self.session.up else {}
        for index in list(self._cache):
            if index not in gpus:
                self._cache.pop(index, None)
        for index in gpus:
            if self._stop.is_set():
                return pending
            try:
                reading = self.backend.slow_sample(index, pcie_throughput=self.pcie_throughput)
            except GpuBackendError as exc:
                # The scrape path finds out for itself that a GPU is lost or NVML is gone and says so.
                self._cache.pop(index, None)
                log.debug("slow readings of GPU %d: %s", index, exc)
                if isinstance(exc, NvmlUnavailableError):
                    return pending
                continue
            except Exception:  # a bug: say so once, keep sampling the other GPUs and later passes
                self._cache.pop(index, None)
                if (index, ("bug",)) not in self._logged:
                    self._logged.add((index, ("bug",)))
                    log.exception("slow readings of GPU %d failed unexpectedly", index)
                continue
            if reading.field_errors and (index, reading.field_errors) not in self._logged:
                self._logged.add((index, reading.field_errors))
                log.warning("GPU %d: could not read %s in the background (left out; see DEBUG logs)", index,
                            ", ".join(reading.field_errors))
            self._cache[index] = (self._clock(), reading)
            pending = pending or reading.activity_pending
        return pending

    def run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            pending = self.sample_once()
            if not pending:
                self._primed.set()
            delay = min(self.interval, FOLLOW_UP_SECONDS) if pending else self.interval
            self._stop.wait(max(0.0, delay - (time.monotonic() - started)))


class XidListener(_Worker):
    def __init__(self, backend: GpuBackend, session: GpuSession, wait_seconds: float = 1.0):
        super().__init__("gpu-xid-listener")
        self.backend = backend
        self.session = session
        self.wait_seconds = wait_seconds
        self._counts: dict[tuple[int, int], int] = {}
        self._watching: int | None = None  # session generation registered for

    def counts(self) -> dict[tuple[int, int], int]:
        return dict(self._counts)

    def listen_once(self) -> bool:
        """Register if the GPU set changed, then wait once for events. False when there was nothing
        to wait on (NVML down or registration failed): the caller pauses before trying again."""
        if not self.session.up:
            self._watching = None
            return False
        generation = self.session.generation
        if generation != self._watching:
            try:
                self.backend.watch_xid(sorted(self.session.gpus))
            except GpuBackendError as exc:
                log.warning("cannot watch XID events (%s); retrying", exc)
                return False
            self._watching = generation
            if self._stop.is_set():  # closed while registering: stay quiet, the process may be exiting
                return False
            log.info("watching XID events on GPU(s) %s", sorted(self.session.gpus))
        try:
            events = self.backend.wait_xid(self.wait_seconds)
        except NvmlUnavailableError:
            self._watching = None
            return False
        except GpuBackendError as exc:
            log.debug("waiting for XID events: %s", exc)
            return False
        for ev in events:
            key = (ev.gpu, ev.xid)
            self._counts[key] = self._counts.get(key, 0) + 1
            log.error("GPU %d reported XID %d%s", ev.gpu, ev.xid,
                      f": {XID_MEANING[ev.xid]}" if ev.xid in XID_MEANING else "")
        return True

    def run(self) -> None:
        while not self._stop.is_set():
            if not self.listen_once():
                self._stop.wait(self.wait_seconds)
