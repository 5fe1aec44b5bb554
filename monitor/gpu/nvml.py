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

Units are converted to base units here (mW → W, mJ → J, MHz → Hz, % → 0-1, KB/s → B/s).
"""
from __future__ import annotations

import ctypes
import logging
import threading
from typing import Any, Callable, Iterable

from monitor.gpu.backend import (DriverInfo, GpuBackendError, GpuIdentity, GpuLostError, GpuSample,
                                 NvmlUnavailableError, PcieThroughput, ProcessSample, XidEvent)

log = logging.getLogger(__name__)

# NVML return codes (nvml.h), by what they mean for us.
_UNAVAILABLE = {1, 9, 12, 17, 18}        # uninitialized, driver not loaded, no library, OS blocked, RM mismatch
_LOST = {15, 16, 28, 999}                # GPU is lost, reset required, GPU not found, unknown
_ABSENT = {3}                            # not supported
_MISSING_FUNCTION = 13                   # function not found: the driver is older than the binding
_TRANSIENT = {21, 27}                    # no data yet, not ready: absent this time, no error
_TIMEOUT = 10
_PSTATE_UNKNOWN = 32
_XID_EVENT = 0x8                         # nvmlEventTypeXidCriticalError

_HINTS = {
    12: "libnvidia-ml.so.1 not found: is the NVIDIA driver installed and visible in this container?",
    9: "the NVIDIA kernel driver is not loaded",
    18: "the NVML library and the kernel driver versions differ: reboot or reload the driver",
}


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class NvmlBackend:
    """Reads GPUs through NVML. ``nvml`` is the ``pynvml`` module (tests pass a stand-in)."""

    def __init__(self, nvml: Any = None):
        if nvml is None:
            import pynvml as nvml
        self._nv = nvml
        self._lock = threading.Lock()
        self._initialised = False
        self._driver: DriverInfo | None = None
        self._handles: dict[int, Any] = {}
        self._absent: dict[int, set[str]] = {}
        self._chosen: dict[str, Callable[..., Any]] = {}
        self._process_names: dict[int, str] = {}
        self._events: Any = None
        self._event_gpus: dict[int, int] = {}  # handle address -> index
        self._readers = self._build_readers()

    # -- errors ----------------------------------------------------------------------------------
    def _code(self, exc: BaseException) -> int | None:
        return getattr(exc, "value", None) if isinstance(exc, self._nv.NVMLError) else None

    def _translate(self, exc: BaseException, call: str, index: int | None = None) -> GpuBackendError:
        code = self._code(exc)
        where = f"GPU {index}: " if index is not None else ""
        msg = f"{where}{call}: {exc}" + (f" ({_HINTS[code]})" if code in _HINTS else "")
        if code in _UNAVAILABLE:
            self._forget()
            return NvmlUnavailableError(msg, gpu=index)
        if code in _LOST:
            if index is not None:
                self._handles.pop(index, None)
            return GpuLostError(msg, gpu=index)
        return GpuBackendError(msg, gpu=index)

    def _forget(self) -> None:
        """NVML went away: the next ``init`` starts from scratch."""
        self._initialised = False
        self._handles.clear()
        self._absent.clear()
        self._events = None
        self._event_gpus = {}

    # -- life cycle ------------------------------------------------------------------------------
    def init(self) -> DriverInfo:
        with self._lock:
            if self._initialised and self._driver is not None:
                return self._driver
            nv = self._nv
            try:
                nv.nvmlInit()
                self._initialised = True
                driver = _text(nv.nvmlSystemGetDriverVersion())
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
            try:
                if self._events is not None:
                    nv.nvmlEventSetFree(self._events)
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
            uuid = _text(nv.nvmlDeviceGetUUID(h))
            name = _text(nv.nvmlDeviceGetName(h))
            bus = _text(nv.nvmlDeviceGetPciInfo(h).busId)
        except nv.NVMLError as exc:
            raise self._translate(exc, "identify", index) from exc
        self._absent[index] = set()
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
                if self._code(exc) == _MISSING_FUNCTION:
                    continue
                raise
            self._chosen[names[0]] = fn
            return value
        raise self._nv.NVMLError(_MISSING_FUNCTION)

    def _build_readers(self) -> tuple[tuple[str, Callable[[Any, GpuSample], None]], ...]:
        call = self._call_first

        def utilization(h: Any, s: GpuSample) -> None:
            u = call(("nvmlDeviceGetUtilizationRates",), h)
            s.utilization_ratio = u.gpu / 100.0
            s.memory_bandwidth_utilization_ratio = u.memory / 100.0

        def memory(h: Any, s: GpuSample) -> None:
            m = call(("nvmlDeviceGetMemoryInfo",), h)
            s.memory_used_bytes, s.memory_free_bytes, s.memory_total_bytes = float(m.used), float(m.free), float(m.total)

        def pstate(h: Any, s: GpuSample) -> None:
            p = call(("nvmlDeviceGetPerformanceState",), h)
            s.performance_state = None if p == _PSTATE_UNKNOWN else int(p)

        def clock_events(h: Any, s: GpuSample) -> None:
            s.clock_event_reasons = int(call(
                ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"), h))

        def scaled(attr: str, names: tuple[str, ...], scale: float, *args: Any) -> Callable[[Any, GpuSample], None]:
            def read(h: Any, s: GpuSample) -> None:
                setattr(s, attr, call(names, h, *args) * scale)
            return read

        return (
            ("utilization", utilization),
            ("memory", memory),
            ("temperature", scaled("temperature_celsius", ("nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"),
                                   1.0, 0)),  # NVML_TEMPERATURE_GPU
            ("power_draw", scaled("power_draw_watts", ("nvmlDeviceGetPowerUsage",), 1e-3)),
            ("power_limit", scaled("power_limit_watts", ("nvmlDeviceGetEnforcedPowerLimit",), 1e-3)),
            ("energy", scaled("energy_joules", ("nvmlDeviceGetTotalEnergyConsumption",), 1e-3)),
            ("sm_clock", scaled("sm_clock_hertz", ("nvmlDeviceGetClockInfo",), 1e6, 1)),  # NVML_CLOCK_SM
            ("memory_clock", scaled("memory_clock_hertz", ("nvmlDeviceGetClockInfo",), 1e6, 2)),  # NVML_CLOCK_MEM
            ("fan_speed", scaled("fan_speed_ratio", ("nvmlDeviceGetFanSpeed",), 1e-2)),
            ("performance_state", pstate),
            ("clock_events", clock_events),
            # Volatile counters (since the driver loaded): (handle, error type, NVML_VOLATILE_ECC).
            ("ecc_corrected", scaled("ecc_corrected_errors", ("nvmlDeviceGetTotalEccErrors",), 1.0, 0, 0)),
            ("ecc_uncorrected", scaled("ecc_uncorrected_errors", ("nvmlDeviceGetTotalEccErrors",), 1.0, 1, 0)),
            ("pcie_replay", scaled("pcie_replay_errors", ("nvmlDeviceGetPcieReplayCounter",), 1.0)),
        )

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
        if code in _ABSENT:
            absent.add(field)
        elif code == _MISSING_FUNCTION:
            absent.add(field)
            log.warning("GPU %d: the driver has no NVML function for %s; it is left out (a newer driver has it)",
                        index, field)
        elif code in _TRANSIENT:
            pass
        elif code in _UNAVAILABLE or code in _LOST:
            raise self._translate(exc, field, index) from exc
        else:
            log.debug("GPU %d: reading %s failed: %s", index, field, exc)
            errors.append(field)

    def _processes(self, h: Any) -> tuple[ProcessSample, ...]:
        nv = self._nv
        used: dict[int, int | None] = {}
        for fn in (nv.nvmlDeviceGetComputeRunningProcesses, nv.nvmlDeviceGetGraphicsRunningProcesses):
            for p in fn(h):
                mem = p.usedGpuMemory
                prev = used.get(p.pid)
                used[p.pid] = mem if prev is None else max(prev, mem or 0)
        return tuple(ProcessSample(pid, self._process_name(pid), mem) for pid, mem in sorted(used.items()))

    def _process_name(self, pid: int) -> str:
        name = self._process_names.get(pid)
        if name is not None:
            return name
        try:
            name = _text(self._nv.nvmlSystemGetProcessName(pid)).rsplit("/", 1)[-1]
        except self._nv.NVMLError:
            name = ""
        if not name:  # NVML cannot see it (another PID namespace, or permissions): ask procfs
            try:
                with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
                    name = f.read().strip()
            except OSError:
                name = ""
        if len(self._process_names) > 4096:  # PIDs are reused; a bounded cache is good enough
            self._process_names.clear()
        self._process_names[pid] = name
        return name

    def pcie_throughput(self, index: int) -> PcieThroughput:
        h = self._handle(index)
        out: list[float | None] = []
        for counter in (1, 0):  # NVML_PCIE_UTIL_RX_BYTES, NVML_PCIE_UTIL_TX_BYTES; each samples ~20 ms
            try:
                out.append(self._nv.nvmlDeviceGetPcieThroughput(h, counter) * 1024.0)
            except self._nv.NVMLError as exc:
                if self._code(exc) not in _ABSENT:
                    raise self._translate(exc, "nvmlDeviceGetPcieThroughput", index) from exc
                out.append(None)
        return PcieThroughput(out[0], out[1])

    # -- XID events ------------------------------------------------------------------------------
    def watch_xid(self, indices: Iterable[int]) -> None:
        nv = self._nv
        try:
            if self._events is not None:
                nv.nvmlEventSetFree(self._events)
                self._events = None
            events = nv.nvmlEventSetCreate()
        except nv.NVMLError as exc:
            raise self._translate(exc, "nvmlEventSetCreate") from exc
        gpus: dict[int, int] = {}
        for index in indices:
            h = self._handle(index)
            try:
                nv.nvmlDeviceRegisterEvents(h, _XID_EVENT, events)
            except nv.NVMLError as exc:
                if self._code(exc) in _ABSENT:
                    log.info("GPU %d does not report XID events", index)
                    continue
                raise self._translate(exc, "nvmlDeviceRegisterEvents", index) from exc
            gpus[_address(h)] = index
        self._events, self._event_gpus = events, gpus

    def wait_xid(self, timeout_seconds: float) -> list[XidEvent]:
        nv = self._nv
        if self._events is None:
            raise GpuBackendError("XID events are not being watched")
        out: list[XidEvent] = []
        timeout_ms = max(0, int(timeout_seconds * 1000))
        while len(out) < 256:
            try:
                data = nv.nvmlEventSetWait_v2(self._events, timeout_ms)
            except nv.NVMLError as exc:
                if self._code(exc) == _TIMEOUT:
                    break
                raise self._translate(exc, "nvmlEventSetWait") from exc
            if data.eventType & _XID_EVENT:
                out.append(XidEvent(self._event_gpus.get(_address(data.device), -1), int(data.eventData)))
            timeout_ms = 0  # drain what is already queued, then return
        return out


def _address(handle: Any) -> int:
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value or 0
    except (TypeError, ctypes.ArgumentError):
        return id(handle)
