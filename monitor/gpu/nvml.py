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

Units are converted to base units here (mW → W, mJ → J, MHz → Hz, % → 0-1, KB/s and MiB/s → B/s).

``slow_sample`` (called by the background sampler only) adds energy, remapped rows, NVLink error
counters, MIG instances and GPM activity (:mod:`monitor.gpu.gpm`).
"""
from __future__ import annotations

import ctypes
import logging
import threading
from typing import Any, Callable, Iterable

from monitor.gpu.backend import (DriverInfo, GpuBackendError, GpuIdentity, GpuLostError, GpuSample, MigSample,
                                 NvmlUnavailableError, PcieThroughput, ProcessSample, RemappedRows, SlowSample,
                                 XidEvent)
from monitor.gpu.gpm import GpmPairs, activity, rates

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
_NOT_FOUND = 6
_FI_MEMORY_TEMP = 82                     # NVML_FI_DEV_MEMORY_TEMP
# NVML_FI_DEV_NVLINK_{CRC_FLIT,CRC_DATA,REPLAY,RECOVERY}_ERROR_COUNT_TOTAL: all links together.
_FI_NVLINK_ERRORS = (("crc_flit", 38), ("crc_data", 45), ("replay", 52), ("recovery", 59))

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
        self._gpm = GpmPairs(nvml)
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
            self._gpm.drop(None)
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
            s.memory_used_bytes, s.memory_free_bytes, s.memory_total_bytes = (float(m.used), float(m.free),
                                                                               float(m.total))

        def pstate(h: Any, s: GpuSample) -> None:
            p = call(("nvmlDeviceGetPerformanceState",), h)
            s.performance_state = None if p == _PSTATE_UNKNOWN else int(p)

        def clock_events(h: Any, s: GpuSample) -> None:
            s.clock_event_reasons = int(call(
                ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"), h))

        def memory_temperature(h: Any, s: GpuSample) -> None:
            s.memory_temperature_celsius = float(self._field_values(h, (_FI_MEMORY_TEMP,))[0])

        def codec(attr: str, name: str) -> Callable[[Any, GpuSample], None]:
            def read(h: Any, s: GpuSample) -> None:
                setattr(s, attr, call((name,), h)[0] / 100.0)  # (percent, sampling period in µs)
            return read

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
            ("sm_clock", scaled("sm_clock_hertz", ("nvmlDeviceGetClockInfo",), 1e6, 1)),  # NVML_CLOCK_SM
            ("memory_clock", scaled("memory_clock_hertz", ("nvmlDeviceGetClockInfo",), 1e6, 2)),  # NVML_CLOCK_MEM
            ("fan_speed", scaled("fan_speed_ratio", ("nvmlDeviceGetFanSpeed",), 1e-2)),
            ("performance_state", pstate),
            ("clock_events", clock_events),
            # Volatile counters (since the driver loaded): (handle, error type, NVML_VOLATILE_ECC).
            ("ecc_corrected", scaled("ecc_corrected_errors", ("nvmlDeviceGetTotalEccErrors",), 1.0, 0, 0)),
            ("ecc_uncorrected", scaled("ecc_uncorrected_errors", ("nvmlDeviceGetTotalEccErrors",), 1.0, 1, 0)),
            ("pcie_replay", scaled("pcie_replay_errors", ("nvmlDeviceGetPcieReplayCounter",), 1.0)),
            ("memory_temperature", memory_temperature),
            ("encoder", codec("encoder_utilization_ratio", "nvmlDeviceGetEncoderUtilization")),
            ("decoder", codec("decoder_utilization_ratio", "nvmlDeviceGetDecoderUtilization")),
            ("pcie_link_generation", scaled("pcie_link_generation", ("nvmlDeviceGetCurrPcieLinkGeneration",), 1)),
            ("pcie_link_generation_max",
             scaled("pcie_link_generation_max", ("nvmlDeviceGetMaxPcieLinkGeneration",), 1)),
            ("pcie_link_width", scaled("pcie_link_width", ("nvmlDeviceGetCurrPcieLinkWidth",), 1)),
            ("pcie_link_width_max", scaled("pcie_link_width_max", ("nvmlDeviceGetMaxPcieLinkWidth",), 1)),
        )

    def _field_values(self, h: Any, ids: tuple[int, ...]) -> list[float | None]:
        """``nvmlDeviceGetFieldValues``: one call for several fields. A field the GPU lacks is None;
        when every field failed, the first failure is raised (so "not supported" marks it absent)."""
        values = self._call_first(("nvmlDeviceGetFieldValues",), h, list(ids))
        out: list[float | None] = []
        first_error = 0
        for v in values:
            if v.nvmlReturn != 0:
                first_error = first_error or int(v.nvmlReturn)
                out.append(None)
                continue
            kind = int(v.valueType)
            u = v.value
            out.append(float((u.dVal, u.uiVal, u.ulVal, u.ullVal, u.sllVal, u.siVal, u.usVal)[kind]
                             if 0 <= kind <= 6 else u.ullVal))
        if first_error and all(x is None for x in out):
            raise self._nv.NVMLError(first_error)
        return out

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

    # -- slow readings (background sampler) ------------------------------------------------------
    def slow_sample(self, index: int, *, pcie_throughput: bool = False) -> SlowSample:
        h = self._handle(index)
        s = SlowSample()
        absent = self._absent.setdefault(index, set())
        errors: list[str] = []
        nv = self._nv

        def read(field: str, fn: Callable[[], None]) -> None:
            if field in absent:
                return
            try:
                fn()
            except nv.NVMLError as exc:
                self._field_failed(index, field, exc, absent, errors)
            except AttributeError as exc:  # nvidia-ml-py older than the function (GPM came in 12.x)
                absent.add(field)
                log.warning("GPU %d: this nvidia-ml-py has no %s; %s is left out (upgrade nvidia-ml-py)",
                            index, exc.name, field)

        def energy() -> None:
            s.energy_joules = self._call_first(("nvmlDeviceGetTotalEnergyConsumption",), h) * 1e-3

        def remapped() -> None:
            corr, unc, pending, failure = self._call_first(("nvmlDeviceGetRemappedRows",), h)
            s.remapped_rows = RemappedRows(float(corr), float(unc), bool(pending), bool(failure))

        def nvlink_errors() -> None:
            values = self._field_values(h, tuple(fid for _, fid in _FI_NVLINK_ERRORS))
            s.nvlink_errors = {name: v for (name, _), v in zip(_FI_NVLINK_ERRORS, values) if v is not None}

        def gpm() -> None:
            if not self._call_first(("nvmlGpmQueryDeviceSupport",), h).isSupportedDevice:
                raise nv.NVMLError(3)  # not supported: absent from now on
            got = self._gpm.read((index, -1), lambda sample: nv.nvmlGpmSampleGet(h, sample))
            if got is not None:
                s.activity = activity(got)
                s.pcie, s.nvlink = rates(got, "pcie"), rates(got, "nvlink")

        def mig() -> None:
            s.mig = self._mig(index, h)

        read("energy", energy)
        read("remapped_rows", remapped)
        read("nvlink_errors", nvlink_errors)
        read("gpm", gpm)
        read("mig", mig)
        if pcie_throughput and s.pcie is None and "pcie_throughput" not in absent:
            try:
                s.pcie = self.pcie_throughput(index)
            except GpuBackendError as exc:
                if isinstance(exc, (NvmlUnavailableError, GpuLostError)):
                    raise
                errors.append("pcie_throughput")
        if errors:
            s.field_errors = tuple(errors)
        return s

    def _mig(self, index: int, h: Any) -> tuple[MigSample, ...] | None:
        nv = self._nv
        if self._call_first(("nvmlDeviceGetMigMode",), h)[0] != 1:  # NVML_DEVICE_MIG_ENABLE
            return None
        out: list[MigSample] = []
        for slot in range(int(nv.nvmlDeviceGetMaxMigDeviceCount(h))):
            try:
                m = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, slot)
            except nv.NVMLError as exc:
                if self._code(exc) == _NOT_FOUND:  # an empty slot
                    continue
                raise
            gi = int(nv.nvmlDeviceGetGpuInstanceId(m))
            try:
                ci: int | None = int(nv.nvmlDeviceGetComputeInstanceId(m))
            except nv.NVMLError:
                ci = None
            used = total = None
            try:
                mem = nv.nvmlDeviceGetMemoryInfo(m)
                used, total = float(mem.used), float(mem.total)
            except nv.NVMLError:
                pass
            ratios = None
            try:
                got = self._gpm.read((index, gi), lambda sample, gi=gi: nv.nvmlGpmMigSampleGet(h, gi, sample))
                if got is not None:
                    ratios = activity(got)
            except (nv.NVMLError, AttributeError):
                pass  # no GPM on this GPU (or binding): the instance is still served, without activity
            out.append(MigSample(gi, ci, _text(nv.nvmlDeviceGetUUID(m)), used, total, ratios))
        return tuple(out)

    def pcie_throughput(self, index: int) -> PcieThroughput:
        """NVML's legacy PCIe counter: samples ~20 ms per direction (GPUs without GPM)."""
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
