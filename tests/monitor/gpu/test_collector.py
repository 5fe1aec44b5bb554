"""GpuCollector output for healthy fake GPUs: names, labels, units, and fresh families per scrape."""
from __future__ import annotations

import threading

import pytest
from prometheus_client import CollectorRegistry

from monitor.gpu.backend import CLOCK_EVENT_REASONS
from monitor.gpu.families import COUNTERS, GAUGES
from monitor.gpu.fake import default_sample
from tests.monitor.gpu.helpers import Scrape


def test_every_field_of_every_gpu_in_base_units(fake, make_collector, collect):
    s = collect(make_collector(fake))
    assert s.value("driftloop_gpu_up") == 1.0
    for index in (0, 1):
        want = default_sample(index)
        ids = {"gpu": str(index), "uuid": f"GPU-fake-{index:04d}"}
        for attr, name, _ in GAUGES:
            assert s.value(name, **ids) == getattr(want, attr), name
        for attr, name, _ in COUNTERS:
            assert s.value(name + "_total", **ids) == getattr(want, attr), name
        assert s.value("driftloop_gpu_ecc_errors_total", type="corrected", **ids) == 3.0
        assert s.value("driftloop_gpu_ecc_errors_total", type="uncorrected", **ids) == 0.0
        assert s.value("driftloop_gpu_info", **ids, name="NVIDIA Fake H100", driver_version="550.54.15",
                       cuda_driver_version="12.4", pci_bus_id=f"00000000:{0x18 + index:02X}:00.0") == 1.0
        assert s.value("driftloop_gpu_collection_errors_total", gpu=str(index)) == 0.0
    assert s.value("driftloop_gpu_utilization_ratio", gpu="1") == pytest.approx(0.35)
    assert s.value("driftloop_gpu_memory_total_bytes", gpu="0") == 80 * 2**30
    assert s.value("driftloop_gpu_collection_duration_seconds") > 0


def test_one_series_per_clock_event_reason(fake, make_collector, collect):
    fake.set(1, clock_event_reasons=0x001 | 0x040)  # idle and hardware thermal slowdown
    s = collect(make_collector(fake))
    reasons = {r for _, r in CLOCK_EVENT_REASONS}
    active = {x.labels["reason"] for x in s.find("driftloop_gpu_clock_event_active", gpu="1") if x.value == 1.0}
    assert {x.labels["reason"] for x in s.find("driftloop_gpu_clock_event_active", gpu="1")} == reasons
    assert active == {"gpu_idle", "hw_thermal_slowdown"}
    assert s.value("driftloop_gpu_clock_event_active", gpu="0", reason="sw_power_cap") == 1.0


def test_unsupported_field_is_absent_for_that_gpu_only(fake, make_collector, collect):
    fake.set(0, fan_speed_ratio=None, ecc_corrected_errors=None, ecc_uncorrected_errors=None, clock_event_reasons=None)
    s = collect(make_collector(fake))
    assert s.gpus("driftloop_gpu_fan_speed_ratio") == {"1"}
    assert s.gpus("driftloop_gpu_ecc_errors_total") == {"1"}
    assert s.gpus("driftloop_gpu_clock_event_active") == {"1"}
    assert s.value("driftloop_gpu_collection_errors_total", gpu="0") == 0.0  # not an error


def test_field_that_fails_is_left_out_and_counted(fake, make_collector, collect, caplog):
    fake.fail_fields(0, "temperature")
    collector = make_collector(fake)
    s = collect(collector)
    assert s.value("driftloop_gpu_collection_errors_total", gpu="0") == 1.0
    assert s.has("driftloop_gpu_utilization_ratio", gpu="0")  # the rest of the GPU is served
    collect(collector)
    assert sum("could not read temperature" in r.getMessage() for r in caplog.records if r.levelname == "WARNING") == 1


def test_families_are_fresh_on_each_scrape(fake, make_collector, collect):
    collector = make_collector(fake)
    first = list(collector.collect())
    fake.set(0, utilization_ratio=0.9)
    second = list(collector.collect())
    assert not {id(f) for f in first} & {id(f) for f in second}
    assert Scrape(first).value("driftloop_gpu_utilization_ratio", gpu="0") == 0.25
    assert Scrape(second).value("driftloop_gpu_utilization_ratio", gpu="0") == 0.9


def test_describe_lets_a_registry_refuse_duplicates(fake, make_collector):
    collector = make_collector(fake)
    described = {m.name for m in collector.describe()}
    collected = {m.name for m in collector.collect()}
    assert collected <= described
    registry = CollectorRegistry(auto_describe=True)
    registry.register(collector)
    with pytest.raises(ValueError, match="Duplicated"):
        registry.register(make_collector(fake))


def test_concurrent_scrapes_both_get_every_gpu(fake, make_collector):
    collector = make_collector(fake)
    results: list[Scrape] = []
    threads = [threading.Thread(target=lambda: results.append(Scrape(collector.collect()))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(results) == 4
    for s in results:
        assert s.gpus("driftloop_gpu_memory_used_bytes") == {"0", "1"}
    assert all(v == 0 for v in collector.errors.values())
