"""What the collector serves from the background sampler: GPM activity, PCIe and NVLink throughput,
NVLink and remapped-row counters, energy, MIG instances, with their age; and the hostname label."""
from __future__ import annotations

import pytest

from monitor.gpu.background import SlowSampler, XidListener
from monitor.gpu.backend import RemappedRows
from monitor.gpu.families import ACTIVITY
from monitor.gpu.fake import ACTIVE


@pytest.fixture
def sampled(fake, make_collector, clock):
    """A collector whose sampler has taken two passes (GPM has its two samples)."""
    def make(**kwargs):
        collector = make_collector(fake, **kwargs)
        collector.sampler = SlowSampler(fake, collector.session, interval_seconds=5.0, clock=clock)
        list(collector.collect())
        collector.sampler.sample_once()
        collector.sampler.sample_once()
        return collector
    return make


def test_gpm_activity_ratios_for_every_gpu(sampled, collect):
    s = collect(sampled())
    for attr, name, _ in ACTIVITY:
        for gpu in ("0", "1"):
            assert s.value(name, gpu=gpu) == ACTIVE[attr], name
    assert s.value("driftloop_gpu_nvlink_throughput_bytes_per_second", gpu="1", direction="tx") == 41e9 + 1
    assert s.value("driftloop_gpu_pcie_throughput_bytes_per_second", gpu="0", direction="rx") == 3e9
    assert s.value("driftloop_gpu_background_sample_age_seconds", gpu="0") == 0.0


def test_counters_of_the_slow_path(sampled, collect, fake):
    fake.set_slow(1, remapped_rows=RemappedRows(3.0, 1.0, pending=True, failure=True))
    collector = sampled()
    collector.sampler.sample_once()
    s = collect(collector)
    assert s.value("driftloop_gpu_energy_joules_total", gpu="0") == 1_000_000.0
    assert s.value("driftloop_gpu_nvlink_errors_total", gpu="0", type="replay") == 2.0
    assert {x.labels["type"] for x in s.find("driftloop_gpu_nvlink_errors_total", gpu="0")} == {
        "crc_flit", "crc_data", "replay", "recovery"}
    assert s.value("driftloop_gpu_remapped_rows_total", gpu="0", type="correctable") == 1.0
    assert s.value("driftloop_gpu_remapped_rows_total", gpu="1", type="uncorrectable") == 1.0
    assert s.value("driftloop_gpu_remapped_rows_pending", gpu="0") == 0.0
    assert s.value("driftloop_gpu_remapped_rows_pending", gpu="1") == 1.0
    assert s.value("driftloop_gpu_remapped_rows_failed", gpu="1") == 1.0


def test_a_gpu_without_gpm_or_nvlink_has_those_series_absent_not_zero(sampled, collect, fake):
    fake.without(1, "gpm", "nvlink", "remapped_rows")
    s = collect(sampled())
    for _, name, _ in ACTIVITY:
        assert s.gpus(name) == {"0"}, name
    assert s.gpus("driftloop_gpu_nvlink_throughput_bytes_per_second") == {"0"}
    assert s.gpus("driftloop_gpu_nvlink_errors_total") == {"0"}
    assert s.gpus("driftloop_gpu_remapped_rows_total") == {"0"}
    assert s.gpus("driftloop_gpu_energy_joules_total") == {"0", "1"}  # the rest of GPU 1 is served
    assert s.value("driftloop_gpu_collection_errors_total", gpu="1") == 0.0  # absent is not an error


def test_fast_path_readings_added_for_dcgm_parity(fake, make_collector, collect):
    fake.set(0, pcie_link_generation=1, memory_temperature_celsius=None)  # idle link trained down; no HBM sensor
    s = collect(make_collector(fake))
    assert s.value("driftloop_gpu_pcie_link_generation", gpu="0") == 1
    assert s.value("driftloop_gpu_pcie_link_generation_max", gpu="0") == 5
    assert s.value("driftloop_gpu_pcie_link_width", gpu="1") == 16
    assert s.value("driftloop_gpu_decoder_utilization_ratio", gpu="1") == 0.05
    assert s.gpus("driftloop_gpu_memory_temperature_celsius") == {"1"}
    assert s.value("driftloop_gpu_memory_temperature_celsius", gpu="1") == 51.0


def test_mig_instances_are_their_own_entities(sampled, collect, fake):
    fake.enable_mig(0, instances=2)
    s = collect(sampled())
    whole = [x for x in s.find("driftloop_gpu_memory_used_bytes", gpu="0") if "gpu_instance" not in x.labels]
    assert len(whole) == 1 and whole[0].value == 2**30
    assert s.value("driftloop_gpu_memory_used_bytes", gpu="0", gpu_instance="2") == 2**30
    assert s.value("driftloop_gpu_memory_total_bytes", gpu="0", gpu_instance="1") == 40 * 2**30
    assert s.value("driftloop_gpu_tensor_active_ratio", gpu="0", gpu_instance="2") == pytest.approx(0.2)
    assert s.value("driftloop_gpu_mig_info", gpu="0", gpu_instance="1", mig_uuid="MIG-fake-0000-1",
                   compute_instance="0", uuid="GPU-fake-0000") == 1.0
    assert not s.has("driftloop_gpu_mig_info", gpu="1")


def test_hostname_label_on_every_gpu_series(sampled, collect, fake):
    collector = sampled(hostname="node-7")
    listener = XidListener(fake, collector.session, wait_seconds=0.05)
    collector.xid = listener
    collect(collector)
    assert listener.listen_once() is True
    fake.emit_xid(0, 48)
    listener.listen_once()
    s = collect(collector)
    assert s.value("driftloop_gpu_xid_errors_total", gpu="0", xid="48") == 1.0   # an event's series too
    gpu_series = [x for x in s.samples if "gpu" in x.labels and x.name != "driftloop_gpu_collection_errors_total"]
    assert gpu_series and all(x.labels.get("hostname") == "node-7" for x in gpu_series)
    assert s.value("driftloop_gpu_info", gpu="0", hostname="node-7", name="NVIDIA Fake H100") == 1.0


def test_describe_names_every_new_family(sampled):
    collector = sampled()
    described = {m.name for m in collector.describe()}
    assert {m.name for m in collector.collect()} <= described


def test_host_label_default_is_this_machine():
    import socket

    from monitor.gpu import host_label
    assert host_label(None) == socket.gethostname()
    assert host_label("") is None and host_label("n1") == "n1"


def test_sampler_interval_and_its_old_name():
    from monitor.config import ExporterConfig
    assert ExporterConfig(pcie_interval_seconds=2.0).sampler_interval_seconds == 2.0
    assert ExporterConfig().sampler_interval_seconds == 5.0


def test_a_bug_in_one_gpus_slow_readings_does_not_stop_the_sampler(fake, make_collector, clock, caplog):
    collector = make_collector(fake)
    sampler = SlowSampler(fake, collector.session, interval_seconds=5.0, clock=clock)
    list(collector.collect())
    real = fake.slow_sample

    def broken(index, **kw):
        if index == 0:
            raise KeyError("a bug")
        return real(index, **kw)
    fake.slow_sample = broken
    sampler.sample_once()
    sampler.sample_once()
    assert set(sampler.snapshot()) == {1}
    assert sum("failed unexpectedly" in r.getMessage() for r in caplog.records) == 1


def test_start_up_is_not_held_by_a_gpu_that_hangs_in_the_sampler(fake):
    """build_gpu_collector returns within its deadline even if a slow reading never returns."""
    import threading
    import time

    from monitor.config import ExporterConfig
    from monitor.gpu import build_gpu_collector
    real = fake.slow_sample
    gate = threading.Event()
    threading.Timer(5.0, gate.set).start()  # a start-up that waited would take these 5 s and fail below

    def hanging(index, **kw):
        gate.wait()
        return real(index, **kw)
    fake.slow_sample = hanging
    started = time.monotonic()
    collector, close = build_gpu_collector(ExporterConfig(call_timeout_seconds=0.5), backend=fake)
    try:
        assert time.monotonic() - started < 3.0
        assert collector.session.up and len(collector.session.gpus) == 2
    finally:
        gate.set()
        close()


def test_the_first_scrape_serves_energy_and_gpm_activity(fake):
    """build_gpu_collector waits (bounded) for the sampler's first passes, GPM's second sample
    included, so nothing slow is missing from the first scrapes (issue 38: energy was absent from two)."""
    from monitor.config import ExporterConfig
    from monitor.gpu import build_gpu_collector
    from tests.monitor.gpu.helpers import Scrape
    collector, close = build_gpu_collector(ExporterConfig(hostname=""), backend=fake)
    try:
        s = Scrape(collector.collect())
    finally:
        close()
    assert s.gpus("driftloop_gpu_energy_joules_total") == {"0", "1"}
    for attr, name, _ in ACTIVITY:
        assert s.value(name, gpu="0") == ACTIVE[attr], name
    assert fake.calls["slow_sample"] == 4  # two passes: GPM's first sample, then its first window


def test_the_sampler_comes_back_soon_only_while_gpm_waits_for_its_second_sample(fake, make_collector, clock):
    collector = make_collector(fake)
    sampler = SlowSampler(fake, collector.session, interval_seconds=5.0, clock=clock)
    list(collector.collect())
    assert sampler.sample_once() is True
    assert sampler.sample_once() is False
    fake.without(1, "gpm")
    collector.session.mark_lost(0, RuntimeError("reset"))
    assert sampler.sample_once() is False  # GPU 0 not readable, GPU 1 has no GPM: nothing to wait for
