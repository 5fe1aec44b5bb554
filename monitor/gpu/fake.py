"""A scripted backend for tests: fixed readings, and every fault the exporter must survive.

This is the one fake the project allows, at the hardware boundary. It can make the library missing
and then appear, lose a GPU and bring it back, make a field unsupported (``None``), hang a GPU or
initialisation until released, start and end processes, and emit XID events::

    fake = FakeBackend(gpus=2, available=False)   # no driver yet
    fake.available = True                          # the driver appears
    fake.lose(1); fake.restore(1)
    fake.hang(0); ...; fake.release(0)
"""
from __future__ import annotations

import dataclasses
import queue
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable

from monitor.gpu.backend import (DriverInfo, GpuBackendError, GpuIdentity, GpuLostError, GpuSample,
                                 NvmlUnavailableError, PcieThroughput, ProcessSample, XidEvent)


def default_sample(index: int = 0) -> GpuSample:
    """A full reading with distinct values per GPU, so a test can tell GPUs apart."""
    return GpuSample(
        utilization_ratio=0.25 + 0.1 * index, memory_bandwidth_utilization_ratio=0.125,
        memory_used_bytes=float(2**30 * (1 + index)), memory_free_bytes=float(2**30 * (79 - index)),
        memory_total_bytes=float(80 * 2**30), temperature_celsius=40.0 + index, power_draw_watts=150.5 + index,
        power_limit_watts=700.0, energy_joules=1_000_000.0 + index, sm_clock_hertz=1.98e9, memory_clock_hertz=2.619e9,
        fan_speed_ratio=0.3, performance_state=0, clock_event_reasons=0x004, ecc_corrected_errors=3.0,
        ecc_uncorrected_errors=0.0, pcie_replay_errors=1.0 + index)


@dataclass
class FakeGpu:
    identity: GpuIdentity
    sample: GpuSample
    processes: dict[int, ProcessSample] = field(default_factory=dict)
    pcie: PcieThroughput | None = None
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
                             s, pcie=PcieThroughput(1e9 * (i + 1), 2e8)) for i, s in enumerate(samples)]
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

    def set(self, index: int, **fields: object) -> None:
        self.gpus[index].sample = dataclasses.replace(self.gpus[index].sample, **fields)

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
        return self._gpu(index, "identify").identity

    def sample(self, index: int, *, processes: bool = False) -> GpuSample:
        g = self._gpu(index, "sample")
        return dataclasses.replace(g.sample, field_errors=g.field_errors,
                                   processes=tuple(g.processes.values()) if processes else None)

    def pcie_throughput(self, index: int) -> PcieThroughput:
        g = self._gpu(index, "pcie_throughput")
        if g.pcie is None:
            raise GpuBackendError(f"GPU {index}: PCIe throughput not available", gpu=index)
        return g.pcie

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
