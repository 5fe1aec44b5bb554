"""GPU metrics for Prometheus: an NVML backend, a simulated one, and a collector that survives NVML.

Inside another process (``driftloop serve``)::

    collector, close = build_gpu_collector(cfg.exporter)
    registry.register(collector)
    ...
    close()

Standalone, ``driftloop exporter`` runs :func:`monitor.gpu.exporter.run_exporter`. Nothing here
imports pydantic, torch or a web framework; ``pynvml`` is imported only when an
:class:`NvmlBackend` is built.
"""
from __future__ import annotations

import logging
import socket
import threading
import time
from typing import TYPE_CHECKING, Callable

from monitor.gpu.backend import (DriverInfo, GpuBackend, GpuBackendError, GpuIdentity, GpuLostError, GpuSample,
                                 MigSample, NvmlUnavailableError, PcieThroughput, ProcessSample, RemappedRows,
                                 SlowSample, XidEvent)
from monitor.gpu.background import SlowSampler, XidListener
from monitor.gpu.collector import GpuCollector
from monitor.gpu.lanes import Lanes
from monitor.gpu.session import GpuSession
from monitor.gpu.simulated import SimulatedBackend

if TYPE_CHECKING:
    from monitor.config import ExporterConfig

__all__ = [
    "DriverInfo", "GpuBackend", "GpuBackendError", "GpuCollector", "GpuIdentity", "GpuLostError", "GpuSample",
    "GpuSession", "MigSample", "NvmlUnavailableError", "PcieThroughput", "ProcessSample", "RemappedRows",
    "SimulatedBackend", "SlowSample", "SlowSampler", "XidEvent", "XidListener", "build_gpu_collector", "host_label",
]

log = logging.getLogger(__name__)


def default_backend(simulate: int = 0) -> GpuBackend:
    if simulate:
        return SimulatedBackend(simulate)
    from monitor.gpu.nvml import NvmlBackend  # imports pynvml; loading the library waits for init()
    return NvmlBackend()


def host_label(configured: str | None) -> str | None:
    """The ``hostname`` label's value: the configured one, this machine's name when unset, none when ``""``."""
    if configured is None:
        return socket.gethostname() or None
    return configured or None


def build_gpu_collector(cfg: "ExporterConfig", *, backend: GpuBackend | None = None,
                        clock: Callable[[], float] = time.monotonic) -> tuple[GpuCollector, Callable[[], None]]:
    """A collector wired as ``cfg`` says (an ``ExporterConfig``), and the function that stops its
    background threads and shuts NVML down. One collection runs here (bounded by
    ``call_timeout_seconds``), so the log says at start-up whether NVML and the GPUs were found; then
    the background sampler's first passes, waited for up to ``call_timeout_seconds`` more, so the first
    scrape already serves energy and GPM activity (not only from the sampler's next interval on)."""
    backend = backend if backend is not None else default_backend(cfg.simulate)
    lanes = Lanes()
    session = GpuSession(backend, lanes=lanes, clock=clock, retry_initial_seconds=cfg.init_retry_initial_seconds,
                         retry_max_seconds=cfg.init_retry_max_seconds)
    sampler = SlowSampler(backend, session, cfg.sampler_interval_seconds, pcie_throughput=cfg.pcie_throughput)
    xid = XidListener(backend, session) if cfg.xid_events else None
    collector = GpuCollector(session, call_timeout_seconds=cfg.call_timeout_seconds,
                             process_metrics=cfg.process_metrics, sampler=sampler, xid=xid,
                             hostname=host_label(cfg.hostname))
    list(collector.collect())  # initialise NVML and identify the GPUs now, so the log says what was found
    for worker in (sampler, xid):  # the sampler's first pass starts now, off this thread (a GPU may hang)
        if worker is not None:
            worker.start()
    if not sampler.wait_primed(cfg.call_timeout_seconds):
        log.warning("the background readings (energy, GPM activity) were not taken within %g s; the first "
                    "scrapes leave them out until they are", cfg.call_timeout_seconds)

    def close() -> None:
        for worker in (sampler, xid):
            if worker is not None:
                worker.close()
        lanes.close()
        # nvmlShutdown can block behind a hung call; do not let that hold the process's exit.
        t = threading.Thread(target=backend.shutdown, name="gpu-shutdown", daemon=True)
        t.start()
        t.join(cfg.call_timeout_seconds)

    return collector, close
