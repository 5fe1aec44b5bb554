"""A simulated backend: N plausible GPUs with moving values, for demos, dashboards and benchmarks.

Each GPU follows a slow load cycle with noise: utilization drives power, temperature follows power
with a thermal lag, energy integrates power (so it only ever grows), memory follows the job that is
"running", clocks drop and ``gpu_idle`` is set when idle, ``sw_power_cap`` when near the limit.
Values depend only on the injected clock and the seed, so a test can step time and check them.
"""
from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from monitor.gpu.backend import (DriverInfo, GpuBackendError, GpuIdentity, GpuSample, PcieThroughput, ProcessSample,
                                 RemappedRows, SlowSample, XidEvent)

MEMORY_TOTAL = 80 * 1024**3
POWER_IDLE, POWER_LIMIT = 70.0, 700.0
AMBIENT, THERMAL_TAU = 28.0, 40.0  # °C, seconds


@dataclass
class _State:
    at: float
    temperature: float
    energy: float
    ecc_corrected: float = 0.0


class SimulatedBackend:
    def __init__(self, count: int, *, seed: int = 0, clock: Callable[[], float] = time.time):
        if count < 1:
            raise ValueError("simulate at least one GPU")
        self.count = count
        self._clock = clock
        self._seed = seed
        rng = random.Random(seed)
        self._phase = [rng.uniform(0, 2 * math.pi) for _ in range(count)]
        self._period = [rng.uniform(240, 600) for _ in range(count)]
        self._rngs = [random.Random(seed * 1000 + i) for i in range(count)]
        now = clock()
        self._state = [_State(now, AMBIENT + 10, rng.uniform(1e6, 5e6)) for _ in range(count)]
        self._locks = [threading.Lock() for _ in range(count)]
        self._xid_stop = threading.Event()

    def init(self) -> DriverInfo:
        return DriverInfo("simulated", "12.4")

    def device_count(self) -> int:
        return self.count

    def identify(self, index: int) -> GpuIdentity:
        self._check(index)
        return GpuIdentity(index, f"GPU-00000000-0000-4000-8000-{self._seed:04x}{index:08x}",
                           "Simulated GPU", f"00000000:{0x18 + index:02X}:00.0")

    def _check(self, index: int) -> None:
        if not 0 <= index < self.count:
            raise GpuBackendError(f"no simulated GPU {index}", gpu=index)

    def _load(self, index: int, t: float) -> float:
        base = 0.5 + 0.45 * math.sin(2 * math.pi * t / self._period[index] + self._phase[index])
        return min(1.0, max(0.0, base + self._rngs[index].uniform(-0.04, 0.04)))

    def sample(self, index: int, *, processes: bool = False) -> GpuSample:
        self._check(index)
        with self._locks[index]:
            now = self._clock()
            util = round(self._load(index, now), 2)  # NVML reports whole percents
            power = POWER_IDLE + util * (POWER_LIMIT - POWER_IDLE) * 0.97
            st = self._state[index]
            dt = max(0.0, now - st.at)
            target = AMBIENT + power * 0.075
            st.temperature = target + (st.temperature - target) * math.exp(-dt / THERMAL_TAU)
            st.energy += power * dt
            if self._rngs[index].random() < dt / 3600:  # about one corrected error an hour
                st.ecc_corrected += 1
            st.at = now
            temperature, ecc = st.temperature, st.ecc_corrected  # energy: a slow reading (slow_sample)
        busy = util > 0.05
        used = (0.15 + 0.7 * util) * MEMORY_TOTAL if busy else 0.02 * MEMORY_TOTAL
        reasons = (0x001 if not busy else 0) | (0x004 if power > 0.95 * POWER_LIMIT else 0)
        sample = GpuSample(
            utilization_ratio=util,
            memory_bandwidth_utilization_ratio=round(util * 0.6, 2),
            memory_used_bytes=float(int(used)),
            memory_free_bytes=float(MEMORY_TOTAL - int(used)),
            memory_total_bytes=float(MEMORY_TOTAL),
            temperature_celsius=float(round(temperature)),
            power_draw_watts=round(power, 3),
            power_limit_watts=POWER_LIMIT,
            sm_clock_hertz=(1980e6 if busy else 345e6),
            memory_clock_hertz=2619e6,
            fan_speed_ratio=round(min(1.0, 0.3 + max(0.0, temperature - 40) / 50), 2),
            performance_state=0 if busy else 8,
            clock_event_reasons=reasons,
            ecc_corrected_errors=ecc,
            ecc_uncorrected_errors=0.0,
            pcie_replay_errors=0.0,
            memory_temperature_celsius=float(round(temperature + 8)),
            encoder_utilization_ratio=0.0,
            decoder_utilization_ratio=0.0,
            pcie_link_generation=5 if busy else 1,  # links train down when idle
            pcie_link_generation_max=5,
            pcie_link_width=16,
            pcie_link_width_max=16,
        )
        if processes:
            sample.processes = (ProcessSample(4000 + index * 10, "python", int(used * 0.98)),) if busy else ()
        return sample

    def slow_sample(self, index: int, *, pcie_throughput: bool = False) -> SlowSample:
        self.sample(index)  # advances energy to now
        with self._locks[index]:
            energy = round(self._state[index].energy, 3)
        util = self._load(index, self._clock())
        # A mixed-precision training job: SMs busy most of the time a kernel runs, tensor cores less.
        activity = {"sm_active": round(util * 0.85, 3), "sm_occupancy": round(util * 0.4, 3),
                    "tensor_active": round(util * 0.55, 3), "dram_active": round(util * 0.35, 3),
                    "fp64_active": 0.0, "fp32_active": round(util * 0.12, 3), "fp16_active": round(util * 0.04, 3)}
        return SlowSample(energy_joules=energy, activity=activity,
                          pcie=PcieThroughput(rx_bytes_per_second=util * 12e9, tx_bytes_per_second=util * 3e9),
                          nvlink=PcieThroughput(util * 150e9, util * 150e9),
                          nvlink_errors={"crc_flit": 0.0, "crc_data": 0.0, "replay": 0.0, "recovery": 0.0},
                          remapped_rows=RemappedRows(0.0, 0.0, pending=False, failure=False))

    def watch_xid(self, indices: Iterable[int]) -> None:
        pass

    def wait_xid(self, timeout_seconds: float) -> list[XidEvent]:
        self._xid_stop.wait(timeout_seconds)  # simulated GPUs do not fail
        return []

    def shutdown(self) -> None:
        self._xid_stop.set()
