"""The per-scrape readings of one GPU: one small reader per field, each filling its part of a
:class:`GpuSample` in base units (mW → W, MHz → Hz, % → 0-1).

:class:`monitor.gpu.nvml.NvmlBackend` builds the readers once and runs them on every scrape; a
reader raises the ``NVMLError`` it got and the backend decides what that means for the field
(absent from now on, failed this time, or the GPU lost). ``call`` is the backend's
``_call_first``: the first of several NVML names that the binding and the driver both have.
"""
from __future__ import annotations

from typing import Any, Callable

from monitor.gpu.backend import GpuSample

Call = Callable[..., Any]
Reader = Callable[[Any, GpuSample], None]

_PSTATE_UNKNOWN = 32
FI_MEMORY_TEMP = 82                      # NVML_FI_DEV_MEMORY_TEMP
# NVML_FI_DEV_NVLINK_{CRC_FLIT,CRC_DATA,REPLAY,RECOVERY}_ERROR_COUNT_TOTAL: all links together.
FI_NVLINK_ERRORS = (("crc_flit", 38), ("crc_data", 45), ("replay", 52), ("recovery", 59))


def field_values(nv: Any, call: Call, h: Any, ids: tuple[int, ...]) -> list[float | None]:
    """``nvmlDeviceGetFieldValues``: one call for several fields. A field the GPU lacks is None;
    when every field failed, the first failure is raised (so "not supported" marks it absent)."""
    values = call(("nvmlDeviceGetFieldValues",), h, list(ids))
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
        raise nv.NVMLError(first_error)
    return out


def build_readers(nv: Any, call: Call) -> tuple[tuple[str, Reader], ...]:
    """``(field, reader)`` pairs in scrape order; ``field`` names the reading in logs and in
    ``GpuSample.field_errors``, and is what the backend remembers as absent per GPU."""

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
        s.memory_temperature_celsius = field_values(nv, call, h, (FI_MEMORY_TEMP,))[0]

    def codec(attr: str, name: str) -> Reader:
        def read(h: Any, s: GpuSample) -> None:
            setattr(s, attr, call((name,), h)[0] / 100.0)  # (percent, sampling period in µs)
        return read

    def scaled(attr: str, names: tuple[str, ...], scale: float, *args: Any) -> Reader:
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
