"""Every fault the exporter must survive, injected through the fake backend (the hardware boundary)."""
from __future__ import annotations

import logging
import threading
import time

import pytest

from monitor.gpu.background import SlowSampler, XidListener
from monitor.gpu.fake import FakeBackend
from tests.monitor.gpu.helpers import Scrape
from tests.support.waiting import wait_until


@pytest.fixture(autouse=True)
def _info_logs(caplog):
    caplog.set_level(logging.INFO)


def _warnings(caplog, needle: str) -> int:
    return sum(needle in r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


def test_no_library_serves_up_0_logs_once_and_retries_with_backoff(make_collector, collect, clock, caplog):
    fake = FakeBackend(gpus=2, available=False)
    collector = make_collector(fake, retry_initial=1.0, retry_max=4.0)
    attempts_at = []
    for step in range(16):  # one scrape per second for 16 s
        before = fake.calls["init"]
        s = collect(collector)
        if fake.calls["init"] > before:
            attempts_at.append(step)
        assert s.value("driftloop_gpu_up") == 0.0
        assert not s.has("driftloop_gpu_utilization_ratio")
        clock.advance(1.0)
    # 1, 2, 4, then capped at 4 s between attempts.
    assert attempts_at == [0, 1, 3, 7, 11, 15]
    assert _warnings(caplog, "NVML unavailable (NVML Shared Library Not Found)") == 1
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1

    fake.available = True  # the driver appears
    clock.advance(4.0)
    s = collect(collector)
    assert s.value("driftloop_gpu_up") == 1.0
    assert s.gpus("driftloop_gpu_utilization_ratio") == {"0", "1"}
    assert any("NVML ready after 7 attempts" in r.getMessage() for r in caplog.records)
    collect(collector)
    assert fake.calls["init"] == 7  # initialised once for good: no init per scrape


def test_lost_gpu_drops_its_series_counts_errors_and_comes_back(fake, make_collector, collect, clock, caplog):
    collector = make_collector(fake, retry_initial=1.0, retry_max=8.0)
    collect(collector)
    fake.lose(1)
    s = collect(collector)
    assert s.gpus("driftloop_gpu_memory_used_bytes") == {"0"}
    assert not s.has("driftloop_gpu_info", gpu="1")
    assert s.value("driftloop_gpu_collection_errors_total", gpu="1") == 1.0
    s = collect(collector)  # still lost: one more error per scrape, the signal does not go quiet
    assert s.value("driftloop_gpu_collection_errors_total", gpu="1") == 2.0
    assert s.value("driftloop_gpu_collection_errors_total", gpu="0") == 0.0
    assert s.value("driftloop_gpu_up") == 1.0
    assert _warnings(caplog, "GPU 1 (GPU-fake-0001) is lost") == 1
    assert collector.health()["lost"] == [1]

    clock.advance(1.0)
    collect(collector)  # retried (due after 1 s) and failed: next retry after 2 s
    identifies = fake.calls["identify"]
    clock.advance(1.0)
    collect(collector)
    assert fake.calls["identify"] == identifies  # not due yet
    fake.restore(1)
    clock.advance(1.0)
    s = collect(collector)
    assert s.gpus("driftloop_gpu_memory_used_bytes") == {"0", "1"}
    assert s.value("driftloop_gpu_info", gpu="1") == 1.0
    assert collector.health()["lost"] == []


def test_driver_gone_mid_run_goes_down_then_recovers(fake, make_collector, collect, clock, caplog):
    collector = make_collector(fake, retry_initial=1.0)
    assert collect(collector).value("driftloop_gpu_up") == 1.0
    fake.available = False
    s = collect(collector)
    assert s.value("driftloop_gpu_up") == 0.0
    assert not s.has("driftloop_gpu_utilization_ratio")
    assert _warnings(caplog, "NVML stopped answering") == 1
    fake.available = True
    assert collect(collector).value("driftloop_gpu_up") == 0.0  # retry not due yet
    clock.advance(1.0)
    s = collect(collector)
    assert s.value("driftloop_gpu_up") == 1.0 and s.gpus("driftloop_gpu_info") == {"0", "1"}


def test_hung_gpu_bounds_the_scrape_and_the_threads(fake, make_collector, collect, caplog):
    collector = make_collector(fake, call_timeout=0.3)
    collect(collector)
    threads_before = threading.active_count()
    fake.hang(0)
    for scrape_no in range(5):
        started = time.monotonic()
        s = collect(collector)
        elapsed = time.monotonic() - started
        assert elapsed < 1.5, f"scrape {scrape_no} took {elapsed:.2f} s"
        assert s.gpus("driftloop_gpu_memory_used_bytes") == {"1"}  # the other GPU keeps flowing
        assert s.value("driftloop_gpu_collection_errors_total", gpu="0") == scrape_no + 1
    assert fake.in_flight == 1  # the hung call was never re-issued behind itself
    assert threading.active_count() == threads_before  # no thread per scrape
    assert _warnings(caplog, "GPU 0 (GPU-fake-0000) did not answer within 0.3 s") == 1
    assert collector.health()["not_answering"] == [0]

    fake.release(0)
    wait_until(lambda: not collector.session.lanes[0].busy, 5, 0.01, "the lane stayed busy after the release")
    s = collect(collector)
    assert s.gpus("driftloop_gpu_memory_used_bytes") == {"0", "1"}
    assert any("GPU 0 answers again" in r.getMessage() for r in caplog.records)


def test_hung_initialisation_is_not_piled_up(make_collector, collect, clock):
    fake = FakeBackend(gpus=1)
    fake.hang_init()
    collector = make_collector(fake, call_timeout=0.2)
    for _ in range(3):
        started = time.monotonic()
        assert collect(collector).value("driftloop_gpu_up") == 0.0
        assert time.monotonic() - started < 1.0
        clock.advance(100)
    assert fake.calls["init"] == 1
    fake.release_init()
    wait_until(lambda: not collector.session.lanes["init"].busy, 5, 0.01, "the lane stayed busy after the release")
    s = collect(collector)  # the late answer is used, not thrown away
    assert s.value("driftloop_gpu_up") == 1.0 and s.has("driftloop_gpu_info", gpu="0")
    assert fake.calls["init"] == 1


def test_process_series_come_and_go_with_the_process(fake, make_collector, collect):
    collector = make_collector(fake, process_metrics=True)
    assert not collect(collector).has("driftloop_gpu_process_memory_used_bytes")
    fake.start_process(0, 4242, "python3", 3 * 2**30)
    fake.start_process(1, 4243, "trainer", None)  # NVML could not tell its memory
    s = collect(collector)
    assert s.value("driftloop_gpu_process_memory_used_bytes", gpu="0", uuid="GPU-fake-0000", pid="4242",
                   process="python3") == 3 * 2**30
    assert not s.has("driftloop_gpu_process_memory_used_bytes", gpu="1")
    fake.end_process(0, 4242)
    assert not collect(collector).has("driftloop_gpu_process_memory_used_bytes", pid="4242")


def test_processes_not_read_unless_asked(fake, make_collector, collect):
    fake.start_process(0, 4242, "python3", 2**30)
    assert not collect(make_collector(fake)).has("driftloop_gpu_process_memory_used_bytes")


def test_xid_events_are_counted_and_outlive_a_lost_gpu(fake, make_collector, collect):
    collector = make_collector(fake)
    listener = XidListener(fake, collector.session, wait_seconds=0.05)
    collector.xid = listener
    collect(collector)
    assert listener.listen_once() is True and fake.watched == [0, 1]
    fake.emit_xid(1, 79)
    fake.emit_xid(1, 79)
    fake.emit_xid(0, 31)
    listener.listen_once()
    fake.lose(1)  # XID 79: fallen off the bus
    s = collect(collector)
    assert s.value("driftloop_gpu_xid_errors_total", gpu="1", uuid="GPU-fake-0001", xid="79") == 2.0
    assert s.value("driftloop_gpu_xid_errors_total", gpu="0", xid="31") == 1.0
    assert not s.has("driftloop_gpu_info", gpu="1")


def test_xid_listener_thread_reports_events(fake, make_collector, collect):
    collector = make_collector(fake)
    collect(collector)
    listener = XidListener(fake, collector.session, wait_seconds=0.05)
    collector.xid = listener
    listener.start()
    try:
        wait_until(lambda: fake.watched is not None, 5, 0.01, "the listener never watched for Xid events")
        fake.emit_xid(0, 48)
        wait_until(listener.counts, 5, 0.01, "the listener never counted the event")
    finally:
        listener.close()
    assert collect(collector).value("driftloop_gpu_xid_errors_total", gpu="0", xid="48") == 1.0


def test_slow_readings_are_read_off_the_scrape_path_served_with_their_age_and_expire(fake, make_collector,
                                                                                     collect, clock):
    collector = make_collector(fake)
    sampler = SlowSampler(fake, collector.session, interval_seconds=5.0, pcie_throughput=True, clock=clock)
    collector.sampler = sampler
    collect(collector)
    s = collect(collector)
    assert not s.has("driftloop_gpu_energy_joules_total") and not s.has("driftloop_gpu_tensor_active_ratio")
    assert fake.calls["slow_sample"] == 0  # scrapes never pay for energy, GPM or PCIe sampling
    sampler.sample_once()
    clock.advance(2)
    s = collect(collector)
    assert s.value("driftloop_gpu_energy_joules_total", gpu="1") == 1_000_001.0
    assert s.value("driftloop_gpu_background_sample_age_seconds", gpu="0") == 2.0
    # GPM needs two samples: no activity yet, and the legacy PCIe counter stands in (it was asked for)
    assert not s.has("driftloop_gpu_sm_active_ratio")
    assert s.value("driftloop_gpu_pcie_throughput_bytes_per_second", gpu="1", direction="rx") == 2e9
    assert fake.calls["pcie_throughput"] == 2
    sampler.sample_once()
    s = collect(collector)
    assert s.value("driftloop_gpu_tensor_active_ratio", gpu="0") == 0.6
    assert s.value("driftloop_gpu_pcie_throughput_bytes_per_second", gpu="1", direction="rx") == 3e9 + 1  # GPM's
    assert fake.calls["pcie_throughput"] == 2  # not asked again while GPM gives it
    clock.advance(16)  # more than three intervals without a fresh reading: dropped, not served stale
    s = collect(collector)
    assert not s.has("driftloop_gpu_energy_joules_total") and not s.has("driftloop_gpu_background_sample_age_seconds")
    sampler.sample_once()
    fake.lose(0)
    s = collect(collector)
    assert s.gpus("driftloop_gpu_energy_joules_total") == {"1"}
    sampler.sample_once()  # the sampler drops what the scrape found lost
    assert set(sampler.snapshot()) == {1}


def test_a_hung_gpu_holds_the_sampler_not_the_scrape(fake, make_collector, collect, clock):
    collector = make_collector(fake, call_timeout=0.3)
    sampler = SlowSampler(fake, collector.session, interval_seconds=5.0, clock=clock)
    collector.sampler = sampler
    collect(collector)
    sampler.sample_once()
    fake.hang(0)
    t = threading.Thread(target=sampler.sample_once, daemon=True)
    t.start()
    started = time.monotonic()
    s = collect(collector)  # GPU 0 times out on its lane; GPU 1 and the cached slow readings are served
    assert time.monotonic() - started < 2.0
    assert s.has("driftloop_gpu_utilization_ratio", gpu="1") and s.has("driftloop_gpu_energy_joules_total", gpu="1")
    fake.release(0)
    t.join(5)
    assert not t.is_alive()


def test_a_scrape_waiting_behind_a_slow_one_still_gets_its_own_deadline(fake, make_collector, collect):
    collector = make_collector(fake, call_timeout=0.4)
    collect(collector)
    fake.hang(0)
    results = []
    threads = [threading.Thread(target=lambda: results.append(Scrape(collector.collect()))) for _ in range(2)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert time.monotonic() - started < 2.0  # about two deadlines
    assert len(results) == 2
    for s in results:  # the second scrape waited ~0.4 s for the lock, yet GPU 1 did not "time out"
        assert s.gpus("driftloop_gpu_memory_used_bytes") == {"1"}
    assert collector.errors.get(1, 0) == 0


def test_a_gpu_hung_at_start_up_does_not_hold_up_the_others(make_collector, collect, clock, caplog):
    fake = FakeBackend(gpus=3)
    fake.hang(1)
    collector = make_collector(fake, call_timeout=0.3)
    s = collect(collector)
    assert s.value("driftloop_gpu_up") == 1.0
    assert s.gpus("driftloop_gpu_info") == {"0", "2"}
    fake.lose(2)
    fake.release(1)
    wait_until(lambda: not collector.session.lanes[1].busy, 5, 0.01, "the lane stayed busy after the release")
    assert _warnings(caplog, "GPU 1 cannot be read (did not answer in time)") == 1
    clock.advance(1.0)  # the next lookup is due
    s = collect(collector)
    assert s.gpus("driftloop_gpu_info") == {"0", "1"}
    assert s.value("driftloop_gpu_collection_errors_total", gpu="2") == 1.0
