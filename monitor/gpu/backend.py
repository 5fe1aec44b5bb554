"""What a GPU backend is: the interface the collector reads through, the plain records it returns,
and the errors it raises.

Three backends implement it: :mod:`monitor.gpu.nvml` (the real thing; the only module that imports
``pynvml``), :mod:`monitor.gpu.simulated` (moving values for demos and dashboards) and
:mod:`monitor.gpu.fake` (scripted values and faults for tests). Every value is already in base units
(bytes, watts, joules, hertz, ratios 0-1), so the collector never converts anything.

A field the GPU does not support is ``None`` in its :class:`GpuSample` (or :class:`SlowSample`): absent
from the output, not an error. ``sample`` is the fast reading taken on every scrape; ``slow_sample``
holds what costs milliseconds or needs two samples over time (energy, GPM activity, PCIe and NVLink
throughput, NVLink and remapped-row counters, MIG instances), read by the background sampler and
served from its last value. Errors, translated once inside each backend::

    GpuBackendError (monitor.errors)   one call failed; ``gpu`` says which GPU when one is known
    ├── NvmlUnavailableError           the library or driver is not usable at all: serve up 0, re-init
    └── GpuLostError                   this GPU is gone (fell off the bus, needs a reset): drop its series
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Protocol

from monitor.errors import GpuBackendError

__all__ = [
    "CLOCK_EVENT_REASONS", "DriverInfo", "GpuBackend", "GpuBackendError", "GpuIdentity", "GpuLostError",
    "GpuSample", "MigSample", "NvmlUnavailableError", "PcieThroughput", "ProcessSample", "RemappedRows",
    "SlowSample", "XidEvent", "ACTIVITY_FIELDS", "NVLINK_ERROR_TYPES",
]


class NvmlUnavailableError(GpuBackendError):
    """NVML cannot be used at all (no library, no driver, driver/library mismatch, not initialised)."""


class GpuLostError(GpuBackendError):
    """One GPU stopped answering (GPU is lost, reset required, not found): its series are dropped."""


# NVML's clock event ("throttle") reason bits and the label each gets. Every reason is exported as a
# 0/1 series so that an alert can tell "not throttled" (0) from "not reported" (absent).
CLOCK_EVENT_REASONS: tuple[tuple[int, str], ...] = (
    (0x001, "gpu_idle"),
    (0x002, "applications_clocks_setting"),
    (0x004, "sw_power_cap"),
    (0x008, "hw_slowdown"),
    (0x010, "sync_boost"),
    (0x020, "sw_thermal_slowdown"),
    (0x040, "hw_thermal_slowdown"),
    (0x080, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
    (0x200, "board_limit"),
    (0x400, "reliability"),
)


@dataclass(frozen=True)
class DriverInfo:
    driver_version: str
    cuda_driver_version: str  # "12.4"; "" when unknown


@dataclass(frozen=True)
class GpuIdentity:
    index: int
    uuid: str
    name: str
    pci_bus_id: str


@dataclass(frozen=True)
class ProcessSample:
    pid: int
    name: str  # "" when the name cannot be read (another PID namespace, for instance)
    used_memory_bytes: int | None


@dataclass(frozen=True)
class PcieThroughput:
    rx_bytes_per_second: float | None
    tx_bytes_per_second: float | None


@dataclass(frozen=True)
class XidEvent:
    gpu: int  # index
    xid: int


@dataclass(frozen=True)
class RemappedRows:
    """Row remapping (Ampere and later): rows replaced because of ECC errors, since manufacture."""
    correctable: float
    uncorrectable: float
    pending: bool   # a remap is waiting for the next GPU reset
    failure: bool   # a remap failed: the GPU should be replaced


# GPM activity ratios (Hopper and later), in the order they are exported; keys of SlowSample.activity.
ACTIVITY_FIELDS: tuple[str, ...] = ("sm_active", "sm_occupancy", "tensor_active", "dram_active",
                                    "fp64_active", "fp32_active", "fp16_active")
NVLINK_ERROR_TYPES: tuple[str, ...] = ("crc_flit", "crc_data", "replay", "recovery")


@dataclass(frozen=True)
class MigSample:
    """One MIG instance of a GPU in MIG mode: served as its own GPU entity with ``gpu_instance``."""
    gpu_instance: int
    compute_instance: int | None
    uuid: str
    memory_used_bytes: float | None = None
    memory_total_bytes: float | None = None
    activity: dict[str, float] | None = None  # GPM ratios of this instance, as in SlowSample


@dataclass
class SlowSample:
    """The readings too slow for the scrape path, taken by the background sampler."""

    energy_joules: float | None = None
    pcie: PcieThroughput | None = None
    # GPM ratios (0-1) by ACTIVITY_FIELDS name; None on GPUs without GPM or before a second sample.
    activity: dict[str, float] | None = None
    nvlink: PcieThroughput | None = None  # NVLink rx/tx bytes per second (GPM), all links together
    nvlink_errors: dict[str, float] | None = None  # by NVLINK_ERROR_TYPES name, all links together
    remapped_rows: RemappedRows | None = None
    mig: tuple[MigSample, ...] | None = None
    # GPM has its first sample and no window yet: the sampler comes back soon instead of an interval later.
    activity_pending: bool = False
    field_errors: tuple[str, ...] = field(default=())


@dataclass
class GpuSample:
    """One reading of one GPU. ``None`` means the GPU does not report that field."""

    utilization_ratio: float | None = None
    memory_bandwidth_utilization_ratio: float | None = None
    memory_used_bytes: float | None = None
    memory_free_bytes: float | None = None
    memory_total_bytes: float | None = None
    temperature_celsius: float | None = None
    power_draw_watts: float | None = None
    power_limit_watts: float | None = None
    sm_clock_hertz: float | None = None
    memory_clock_hertz: float | None = None
    fan_speed_ratio: float | None = None
    performance_state: int | None = None
    clock_event_reasons: int | None = None  # bit mask, see CLOCK_EVENT_REASONS
    ecc_corrected_errors: float | None = None
    ecc_uncorrected_errors: float | None = None
    pcie_replay_errors: float | None = None
    memory_temperature_celsius: float | None = None
    encoder_utilization_ratio: float | None = None
    decoder_utilization_ratio: float | None = None
    pcie_link_generation: int | None = None
    pcie_link_generation_max: int | None = None
    pcie_link_width: int | None = None
    pcie_link_width_max: int | None = None
    processes: tuple[ProcessSample, ...] | None = None  # only read when process metrics are on
    # Fields that failed with an unexpected error (not "not supported"): counted as a collection error.
    field_errors: tuple[str, ...] = field(default=())


class GpuBackend(Protocol):
    """The source of GPU readings. Every method may block (NVML does); the collector bounds that.

    Methods raise :class:`NvmlUnavailableError` when the library or driver is gone and
    :class:`GpuLostError` when one GPU is; any other :class:`GpuBackendError` is a failed call.
    """

    def init(self) -> DriverInfo:
        """Initialise (idempotent while initialised) and return driver versions."""

    def device_count(self) -> int: ...

    def identify(self, index: int) -> GpuIdentity:
        """Look the GPU up afresh (a lost GPU that came back gets a new handle here)."""

    def sample(self, index: int, *, processes: bool = False) -> GpuSample: ...

    def slow_sample(self, index: int, *, pcie_throughput: bool = False) -> SlowSample:
        """The slow readings of one GPU; only the background sampler calls this. GPM activity needs two
        samples at least 0.1 s apart, so the first call after a GPU is identified has ``activity`` None
        and ``activity_pending`` True; the ratios cover the time since the previous call. ``pcie_throughput``
        asks for NVML's legacy PCIe counter (~20 ms per direction) where GPM cannot give it."""

    def watch_xid(self, indices: Iterable[int]) -> None:
        """Start receiving XID events for these GPUs (replaces an earlier registration)."""

    def wait_xid(self, timeout_seconds: float) -> list[XidEvent]:
        """Block up to ``timeout_seconds`` for XID events; ``[]`` on timeout."""

    def shutdown(self) -> None: ...
