"""A scripted backend for tests: fixed readings, and every fault the exporter must survive.

This is the one fake the project allows, at the hardware boundary. It can make the library missing
and then appear, lose a GPU and bring it back, make a field unsupported (``None``), hang a GPU or
initialisation until released, start and end processes, and emit XID events. The slow readings
model what NVML does: GPM activity needs two samples (the first ``slow_sample`` after a GPU is
identified has none), and a GPU without GPM, NVLink, row remapping or MIG answers without them (the
NVML backend turns ``NVMLError_NotSupported`` into exactly that)::

    fake = FakeBackend(gpus=2, available=False)   # no driver yet
    fake.available = True                          # the driver appears
    fake.lose(1); fake.restore(1)
    fake.hang(0); ...; fake.release(0)
    fake.without(1, "gpm", "nvlink")              # an older GPU: no activity ratios, no NVLink
    fake.set_slow(0, activity={**ACTIVE, "tensor_active": 0.9})
"""
from __future__ import annotations

import dataclasses
import queue
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from monitor.gpu.backend import (DriverInfo, GpuIdentity, GpuLostError, GpuSample, MigSample,
                                 NvmlUnavailableError, PcieThroughput, ProcessSample, RemappedRows, SlowSample,
                                 XidEvent)

# GPM ratios of a GPU training with mixed precision: busy SMs, tensor cores doing most of the work.
ACTIVE = {"sm_active": 0.8, "sm_occupancy": 0.45, "tensor_active": 0.6, "dram_active": 0.35,
          "fp64_active": 0.0, "fp32_active": 0.1, "fp16_active": 0.05}
FEATURES = ("gpm", "nvlink", "remapped_rows", "mig", "energy")


def default_sample(index: int = 0) -> GpuSample:
    """A full reading with distinct values per GPU, so a test can tell GPUs apart."""
    return GpuSample(
        utilization_ratio=0.25 + 0.1 * index, memory_bandwidth_utilization_ratio=0.125,
        memory_used_bytes=float(2**30 * (1 + index)), memory_free_bytes=float(2**30 * (79 - index)),
        memory_total_bytes=float(80 * 2**30), temperature_celsius=40.0 + index, power_draw_watts=150.5 + index,
        power_limit_watts=700.0, sm_clock_hertz=1.98e9, memory_clock_hertz=2.619e9,
        fan_speed_ratio=0.3, performance_state=0, clock_event_reasons=0x004, ecc_corrected_errors=3.0,
        ecc_uncorrected_errors=0.0, pcie_replay_errors=1.0 + index, memory_temperature_celsius=50.0 + index,
        encoder_utilization_ratio=0.0, decoder_utilization_ratio=0.05, pcie_link_generation=5,
        pcie_link_generation_max=5, pcie_link_width=16, pcie_link_width_max=16)


def default_slow(index: int = 0) -> SlowSample:
    """Slow readings of a Hopper-class GPU once GPM has two samples (energy, GPM, NVLink, remapped rows)."""
    return SlowSample(
        energy_joules=1_000_000.0 + index, pcie=PcieThroughput(3e9 + index, 1e9), activity=dict(ACTIVE),
        nvlink=PcieThroughput(40e9, 41e9 + index), nvlink_errors={"crc_flit": 0.0, "crc_data": 0.0, "replay": 2.0,
                                                                 "recovery": 0.0},
        remapped_rows=RemappedRows(1.0, 0.0, pending=False, failure=False))


@dataclass
class FakeGpu:
    identity: GpuIdentity
    sample: GpuSample
    processes: dict[int, ProcessSample] = field(default_factory=dict)
    pcie: PcieThroughput | None = None  # NVML's legacy counter (the GPM one is in slow.pcie)
    slow: SlowSample = field(default_factory=SlowSample)
    gpm_samples: int = 0  # GPM samples since identified: activity needs two
    lost: str | None = None
    field_errors: tuple[str, ...] = ()
    released: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.released.set()


class FakeBackend:
    def __init__(self, gpus: int | list[GpuSample] = 2, *, available: bool = True,
                 driver: DriverInfo = DriverInfo("550.54.15", "12.4")):
        samples = [default_sample(i) for i in range(gpus)] if isinstance(gpus, int) else list(gpus)
        self.gpus = [FakeGpu(GpuIdentity(i, f"GPU-fake-{i:04d}", "NVIDIA Fake H100", f"00000000:{0x18 + i:02X}:00.0"),
                             s, pcie=PcieThroughput(1e9 * (i + 1), 2e8), slow=default_slow(i))
                     for i, s in enumerate(samples)]
        self.available = available
        self.unavailable_reason = "NVML Shared Library Not Found"
        self.driver = driver
        self.calls: Counter[str] = Counter()
        self.in_flight = 0  # calls running right now (a hung one stays counted)
        self._init_released = threading.Event()
        self._init_released.set()
        self._xid: queue.SimpleQueue[XidEvent] = queue.SimpleQueue()
        self.watched: list[int] | None = None
        self._lock = threading.Lock()

    # -- scripting faults ------------------------------------------------------------------------
    def lose(self, index: int, reason: str = "GPU is lost") -> None:
        self.gpus[index].lost = reason

    def restore(self, index: int) -> None:
        self.gpus[index].lost = None

    def hang(self, index: int) -> None:
        self.gpus[index].released.clear()

    def release(self, index: int) -> None:
        self.gpus[index].released.set()

    def hang_init(self) -> None:
        self._init_released.clear()

    def release_init(self) -> None:
        self._init_released.set()

    def set(self, index: int, **fields: Any) -> None:
        self.gpus[index].sample = dataclasses.replace(self.gpus[index].sample, **fields)

    def set_slow(self, index: int, **fields: Any) -> None:
        self.gpus[index].slow = dataclasses.replace(self.gpus[index].slow, **fields)

    def without(self, index: int, *features: str) -> None:
        """Model a GPU that lacks these (NVML answers NotSupported): ``gpm`` (activity, and the PCIe
        and NVLink rates GPM gives), ``nvlink``, ``remapped_rows``, ``mig``, ``energy``."""
        unknown = set(features) - set(FEATURES)
        if unknown:
            raise ValueError(f"unknown features {sorted(unknown)}; known: {FEATURES}")
        drop: dict[str, object] = {}
        if "gpm" in features:
            drop.update(activity=None, pcie=None, nvlink=None)
        if "nvlink" in features:
            drop.update(nvlink=None, nvlink_errors=None)
        if "remapped_rows" in features:
            drop["remapped_rows"] = None
        if "mig" in features:
            drop["mig"] = None
        if "energy" in features:
            drop["energy_joules"] = None
        self.set_slow(index, **drop)

    def enable_mig(self, index: int, instances: int = 2) -> None:
        """Put a GPU in MIG mode with ``instances`` equal GPU instances."""
        total = (self.gpus[index].sample.memory_total_bytes or 0.0) / instances
        self.set_slow(index, mig=tuple(
            MigSample(gpu_instance=gi + 1, compute_instance=0, uuid=f"MIG-fake-{index:04d}-{gi + 1}",
                      memory_used_bytes=float(2**29 * (gi + 1)), memory_total_bytes=total,
                      activity={**ACTIVE, "tensor_active": 0.1 * (gi + 1)}) for gi in range(instances)))

    def fail_fields(self, index: int, *fields: str) -> None:
        self.gpus[index].field_errors = fields

    def start_process(self, index: int, pid: int, name: str, used_memory_bytes: int | None) -> None:
        self.gpus[index].processes[pid] = ProcessSample(pid, name, used_memory_bytes)

    def end_process(self, index: int, pid: int) -> None:
        self.gpus[index].processes.pop(pid, None)

    def emit_xid(self, index: int, xid: int) -> None:
        self._xid.put(XidEvent(index, xid))

    def release_all(self) -> None:
        self._init_released.set()
        for g in self.gpus:
            g.released.set()

    # -- GpuBackend ------------------------------------------------------------------------------
    def _enter(self, call: str) -> None:
        self.calls[call] += 1
        if not self.available:
            raise NvmlUnavailableError(self.unavailable_reason)

    def _gpu(self, index: int, call: str) -> FakeGpu:
        self._enter(call)
        if not 0 <= index < len(self.gpus):
            raise GpuLostError(f"GPU {index}: not found", gpu=index)
        g = self.gpus[index]
        if not g.released.is_set():
            with self._lock:
                self.in_flight += 1
            try:
                g.released.wait()
            finally:
                with self._lock:
                    self.in_flight -= 1
        if g.lost is not None:
            raise GpuLostError(f"GPU {index}: {call}: {g.lost}", gpu=index)
        return g

    def init(self) -> DriverInfo:
        self._enter("init")
        self._init_released.wait()
        return self.driver

    def device_count(self) -> int:
        self._enter("device_count")
        return len(self.gpus)

    def identify(self, index: int) -> GpuIdentity:
        g = self._gpu(index, "identify")
        g.gpm_samples = 0  # a new handle: GPM starts over
        return g.identity

    def sample(self, index: int, *, processes: bool = False) -> GpuSample:
        g = self._gpu(index, "sample")
        return dataclasses.replace(g.sample, field_errors=g.field_errors,
                                   processes=tuple(g.processes.values()) if processes else None)

    def slow_sample(self, index: int, *, pcie_throughput: bool = False) -> SlowSample:
        g = self._gpu(index, "slow_sample")
        out = dataclasses.replace(g.slow)
        if out.activity is not None or out.mig:
            g.gpm_samples += 1
            if g.gpm_samples < 2:  # GPM needs two samples before it can say anything
                out = dataclasses.replace(out, activity=None, pcie=None, nvlink=None, activity_pending=True, mig=tuple(
                    dataclasses.replace(m, activity=None) for m in out.mig or ()) or out.mig)
        if pcie_throughput and out.pcie is None:
            self.calls["pcie_throughput"] += 1  # the legacy counter NVML samples for ~40 ms
            if g.pcie is None:  # failed (NVML would answer an error): counted, the rest is served
                out.field_errors = (*out.field_errors, "pcie_throughput")
            else:
                out.pcie = g.pcie
        return out

    def watch_xid(self, indices: Iterable[int]) -> None:
        self._enter("watch_xid")
        self.watched = list(indices)

    def wait_xid(self, timeout_seconds: float) -> list[XidEvent]:
        self._enter("wait_xid")
        try:
            out = [self._xid.get(timeout=timeout_seconds)]
        except queue.Empty:
            return []
        while True:
            try:
                out.append(self._xid.get_nowait())
            except queue.Empty:
                return out

    def shutdown(self) -> None:
        self.calls["shutdown"] += 1
        self.release_all()
