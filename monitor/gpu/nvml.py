"""The NVML backend: the only module that imports ``pynvml`` (the ``nvidia-ml-py`` distribution).

NVML is initialised once for the life of the process (``init`` is idempotent) and again only after
it stopped answering. NVML errors are translated here, once:

* ``NotSupported`` (and a function the driver lacks) means the GPU does not report that field: it is
  ``None``, remembered per GPU so the failing call is not repeated on every scrape. A missing
  function is logged once, since that is how metrics go missing silently after a driver upgrade;
* ``GPU is lost`` / ``GPU requires reset`` / ``GPU not found`` / ``Unknown`` →
  :class:`GpuLostError` for that GPU (its handle is dropped and looked up again later);
* no library, no driver, not initialised, library/driver mismatch → :class:`NvmlUnavailableError`;
* anything else fails one field: it is listed in ``GpuSample.field_errors`` and the rest is served.

Units are converted to base units as they are read (mW → W, mJ → J, MHz → Hz, % → 0-1, KB/s and MiB/s → B/s).

``slow_sample`` (called by the background sampler only) adds energy, remapped rows, NVLink error
counters, MIG instances and GPM activity (:mod:`monitor.gpu.gpm`).

This class keeps NVML's life cycle, the handles and the error translation; what it reads is in the
modules beside it, which are passed the ``pynvml`` module and import no binding themselves:
:mod:`~monitor.gpu.nvml_codes` (what a return code means), :mod:`~monitor.gpu.nvml_readers` (the
per-scrape fields), :mod:`~monitor.gpu.nvml_slow` (the background readings, MIG included),
:mod:`~monitor.gpu.nvml_processes` (process lists and names) and :mod:`~monitor.gpu.nvml_events`
(XID events).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Iterable

from monitor.gpu.backend import (DriverInfo, GpuBackendError, GpuIdentity, GpuLostError, GpuSample,
                                 NvmlUnavailableError, PcieThroughput, ProcessSample, SlowSample, XidEvent)
from monitor.gpu.gpm import GpmPairs
from monitor.gpu.nvml_codes import ABSENT, LOST, MISSING_FUNCTION, TRANSIENT, UNAVAILABLE, code_of, message, text
from monitor.gpu.nvml_events import XidEvents
from monitor.gpu.nvml_processes import ProcessNames, running_processes
from monitor.gpu.nvml_readers import build_readers
from monitor.gpu.nvml_slow import build_slow_readers

log = logging.getLogger(__name__)


class NvmlBackend:
    """Reads GPUs through NVML. ``nvml`` is the ``pynvml`` module (tests pass a stand-in, and a
    ``clock`` that spaces GPM samples without sleeping)."""

    def __init__(self, nvml: Any = None, *, clock: Callable[[], float] = time.monotonic):
        if nvml is None:
            import pynvml
            nvml = pynvml
        self._nv = nvml
        self._lock = threading.Lock()
        self._initialised = False
        self._driver: DriverInfo | None = None
        self._handles: dict[int, Any] = {}
        self._absent: dict[int, set[str]] = {}
        self._chosen: dict[str, Callable[..., Any]] = {}
        self._process_names = ProcessNames(nvml)
        self._xid = XidEvents(nvml, self._translate)
        self._gpm = GpmPairs(nvml, clock)
        self._readers = build_readers(nvml, self._call_first)
        self._slow_readers = build_slow_readers(nvml, self._call_first, self._gpm)

    # -- errors ----------------------------------------------------------------------------------
    def _code(self, exc: BaseException) -> int | None:
        return code_of(self._nv, exc)

    def _translate(self, exc: BaseException, call: str, index: int | None = None) -> GpuBackendError:
        code = self._code(exc)
        msg = message(exc, call, code, index)
        if code in UNAVAILABLE:
            self._forget()
            return NvmlUnavailableError(msg, gpu=index)
        if code in LOST:
            if index is not None:
                self._handles.pop(index, None)
            return GpuLostError(msg, gpu=index)
        return GpuBackendError(msg, gpu=index)

    def _forget(self) -> None:
        """NVML went away: the next ``init`` starts from scratch."""
        self._initialised = False
        self._handles.clear()
        self._absent.clear()
        self._xid.forget()
        self._gpm.drop(None)

    # -- life cycle ------------------------------------------------------------------------------
    def init(self) -> DriverInfo:
        with self._lock:
            if self._initialised and self._driver is not None:
                return self._driver
            nv = self._nv
            try:
                nv.nvmlInit()
                self._initialised = True
                driver = text(nv.nvmlSystemGetDriverVersion())
                try:
                    v = int(nv.nvmlSystemGetCudaDriverVersion())
                    cuda = f"{v // 1000}.{(v % 1000) // 10}"
                except nv.NVMLError:
                    cuda = ""
            except nv.NVMLError as exc:
                raise self._translate(exc, "nvmlInit") from exc
            self._driver = DriverInfo(driver, cuda)
            return self._driver

    def shutdown(self) -> None:
        with self._lock:
            if not self._initialised:
                return
            nv = self._nv
            self._gpm.drop(None)
            try:
                self._xid.free()
                nv.nvmlShutdown()
            except nv.NVMLError as exc:
                log.debug("nvmlShutdown: %s", exc)
            self._forget()

    # -- devices ---------------------------------------------------------------------------------
    def device_count(self) -> int:
        try:
            return int(self._nv.nvmlDeviceGetCount())
        except self._nv.NVMLError as exc:
            raise self._translate(exc, "nvmlDeviceGetCount") from exc

    def _handle(self, index: int) -> Any:
        h = self._handles.get(index)
        if h is None:
            try:
                h = self._nv.nvmlDeviceGetHandleByIndex(index)
            except self._nv.NVMLError as exc:
                raise self._translate(exc, "nvmlDeviceGetHandleByIndex", index) from exc
            self._handles[index] = h
        return h

    def identify(self, index: int) -> GpuIdentity:
        self._handles.pop(index, None)  # a fresh handle: this is how a GPU that came back is found
        nv = self._nv
        h = self._handle(index)
        try:
            uuid = text(nv.nvmlDeviceGetUUID(h))
            name = text(nv.nvmlDeviceGetName(h))
            bus = text(nv.nvmlDeviceGetPciInfo(h).busId)
        except nv.NVMLError as exc:
            raise self._translate(exc, "identify", index) from exc
        self._absent[index] = set()
        self._gpm.drop(index)  # samples of the old handle say nothing about the new one
        return GpuIdentity(index, uuid, name, bus)

    # -- readings --------------------------------------------------------------------------------
    def _call_first(self, names: tuple[str, ...], *args: Any) -> Any:
        """Call the first of ``names`` that both the binding and the driver have; remember which.

        NVML renames functions across releases (``...ThrottleReasons`` became ``...ClocksEventReasons``,
        ``GetTemperature`` became ``GetTemperatureV``): try the new name, fall back to the old one."""
        fn = self._chosen.get(names[0])
        if fn is not None:
            return fn(*args)
        for name in names:
            fn = getattr(self._nv, name, None)
            if fn is None:
                continue
            try:
                value = fn(*args)
            except self._nv.NVMLError as exc:
                if self._code(exc) == MISSING_FUNCTION:
                    continue
                raise
            self._chosen[names[0]] = fn
            return value
        raise self._nv.NVMLError(MISSING_FUNCTION)

    def sample(self, index: int, *, processes: bool = False) -> GpuSample:
        h = self._handle(index)
        s = GpuSample()
        absent = self._absent.setdefault(index, set())
        errors: list[str] = []
        for field, read in self._readers:
            if field in absent:
                continue
            try:
                read(h, s)
            except self._nv.NVMLError as exc:
                self._field_failed(index, field, exc, absent, errors)
        if processes and "processes" not in absent:
            try:
                s.processes = self._processes(h)
            except self._nv.NVMLError as exc:
                self._field_failed(index, "processes", exc, absent, errors)
        if errors:
            s.field_errors = tuple(errors)
        return s

    def _field_failed(self, index: int, field: str, exc: BaseException, absent: set[str], errors: list[str]) -> None:
        code = self._code(exc)
        if code in ABSENT:
            absent.add(field)
        elif code == MISSING_FUNCTION:
            absent.add(field)
            log.warning("GPU %d: the driver has no NVML function for %s; it is left out (a newer driver has it)",
                        index, field)
        elif code in TRANSIENT:
            pass
        elif code in UNAVAILABLE or code in LOST:
            raise self._translate(exc, field, index) from exc
        else:
            log.debug("GPU %d: reading %s failed: %s", index, field, exc)
            errors.append(field)

    def _processes(self, h: Any) -> tuple[ProcessSample, ...]:
        return running_processes(self._nv, h, self._process_names)

    # -- slow readings (background sampler) ------------------------------------------------------
    def slow_sample(self, index: int, *, pcie_throughput: bool = False) -> SlowSample:
        h = self._handle(index)
        s = SlowSample()
        absent = self._absent.setdefault(index, set())
        errors: list[str] = []
        for field, read in self._slow_readers:
            if field in absent:
                continue
            try:
                read(index, h, s)
            except self._nv.NVMLError as exc:
                self._field_failed(index, field, exc, absent, errors)
            except AttributeError as exc:  # nvidia-ml-py older than the function (GPM came in 12.x)
                absent.add(field)
                log.warning("GPU %d: this nvidia-ml-py has no %s; %s is left out (upgrade nvidia-ml-py)",
                            index, exc.name, field)
        if pcie_throughput and s.pcie is None and "pcie_throughput" not in absent:
            try:
                s.pcie = self.pcie_throughput(index)
            except GpuBackendError as exc:
                if isinstance(exc, (NvmlUnavailableError, GpuLostError)):
                    raise
                errors.append("pcie_throughput")
        s.activity_pending = self._gpm.pending(index)
        if errors:
            s.field_errors = tuple(errors)
        return s

    def pcie_throughput(self, index: int) -> PcieThroughput:
        """NVML's legacy PCIe counter: samples ~20 ms per direction (GPUs without GPM)."""
        h = self._handle(index)
        out: list[float | None] = []
        for counter in (1, 0):  # NVML_PCIE_UTIL_RX_BYTES, NVML_PCIE_UTIL_TX_BYTES; each samples ~20 ms
            try:
                out.append(self._nv.nvmlDeviceGetPcieThroughput(h, counter) * 1024.0)
            except self._nv.NVMLError as exc:
                if self._code(exc) not in ABSENT:
                    raise self._translate(exc, "nvmlDeviceGetPcieThroughput", index) from exc
                out.append(None)
        return PcieThroughput(out[0], out[1])

    # -- XID events ------------------------------------------------------------------------------
    def watch_xid(self, indices: Iterable[int]) -> None:
        self._xid.watch((index, self._handle(index)) for index in indices)

    def wait_xid(self, timeout_seconds: float) -> list[XidEvent]:
        return self._xid.wait(timeout_seconds)
