"""The simulated backend moves plausibly: bounded ratios, energy only grows, heat follows power."""
from __future__ import annotations

import statistics

import pytest

from monitor.gpu.backend import GpuBackendError
from monitor.gpu.simulated import SimulatedBackend
from tests.monitor.gpu.helpers import ManualClock


def _run(backend: SimulatedBackend, clock: ManualClock, index: int, steps: int, dt: float):
    out = []
    for _ in range(steps):
        clock.advance(dt)
        out.append(backend.sample(index, processes=True))
    return out


def test_values_stay_plausible_and_move():
    clock = ManualClock()
    sim = SimulatedBackend(4, seed=1, clock=clock)
    for index in range(4):
        samples = _run(sim, clock, index, 200, 5.0)
        for s in samples:
            assert 0 <= s.utilization_ratio <= 1 and 0 <= s.fan_speed_ratio <= 1
            assert s.memory_used_bytes + s.memory_free_bytes == s.memory_total_bytes
            assert 20 <= s.temperature_celsius <= 95
            assert 0 < s.power_draw_watts <= s.power_limit_watts
        assert len({s.utilization_ratio for s in samples}) > 20  # it moves
        energies = []
        for _ in range(3):
            clock.advance(1.0)
            energies.append(sim.slow_sample(index).energy_joules)
        assert all(b > a for a, b in zip(energies, energies[1:]))  # a counter: only grows


def test_temperature_follows_power():
    clock = ManualClock()
    sim = SimulatedBackend(1, seed=3, clock=clock)
    samples = _run(sim, clock, 0, 400, 5.0)
    power = [s.power_draw_watts for s in samples]
    temperature = [s.temperature_celsius for s in samples]
    assert statistics.correlation(power, temperature) > 0.6


def test_idle_gpus_say_so():
    clock = ManualClock()
    sim = SimulatedBackend(2, seed=0, clock=clock)
    samples = _run(sim, clock, 0, 300, 5.0) + _run(sim, clock, 1, 300, 5.0)
    idle = [s for s in samples if s.utilization_ratio <= 0.05]
    busy = [s for s in samples if s.utilization_ratio > 0.05]
    assert idle and busy
    assert all(s.clock_event_reasons & 0x1 and s.processes == () for s in idle)
    assert all(not s.clock_event_reasons & 0x1 and len(s.processes) == 1 for s in busy)


def test_same_seed_same_values_and_distinct_identities():
    a = SimulatedBackend(3, seed=7, clock=ManualClock())
    b = SimulatedBackend(3, seed=7, clock=ManualClock())
    assert a.sample(2) == b.sample(2)
    assert len({a.identify(i).uuid for i in range(3)}) == 3
    with pytest.raises(GpuBackendError):
        a.sample(3)
