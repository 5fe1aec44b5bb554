"""The real NVML backend and exporter on a machine with an NVIDIA GPU (skipped elsewhere).

Run with ``pytest -m gpu``. Values are checked for sanity, not equality: whatever the GPU is doing,
memory is positive, temperatures are plausible, and the exporter serves every core series.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import httpx
import pytest

from monitor.gpu import build_gpu_collector
from tests.support.prometheus import require
from monitor.gpu.backend import NvmlUnavailableError
from tests.monitor.gpu.helpers import Scrape
from tests.support.waiting import wait_until

pytestmark = pytest.mark.gpu

# Series every datacenter GPU reports (fan speed is absent on passively cooled boards, by design).
CORE = ("driftloop_gpu_info", "driftloop_gpu_utilization_ratio", "driftloop_gpu_memory_bandwidth_utilization_ratio",
        "driftloop_gpu_memory_used_bytes", "driftloop_gpu_memory_free_bytes", "driftloop_gpu_memory_total_bytes",
        "driftloop_gpu_temperature_celsius", "driftloop_gpu_power_draw_watts", "driftloop_gpu_power_limit_watts",
        "driftloop_gpu_energy_joules_total", "driftloop_gpu_sm_clock_hertz", "driftloop_gpu_memory_clock_hertz",
        "driftloop_gpu_performance_state", "driftloop_gpu_clock_event_active")


@pytest.fixture(scope="module")
def nvml():
    from monitor.gpu.nvml import NvmlBackend
    backend = NvmlBackend()
    try:
        backend.init()
    except NvmlUnavailableError as exc:
        pytest.skip(f"no usable NVIDIA GPU: {exc}")
    yield backend
    backend.shutdown()


def test_identity_and_readings_are_sane(nvml):
    assert re.fullmatch(r"\d+\.\d+(\.\d+)?", nvml.init().driver_version)
    count = nvml.device_count()
    assert count >= 1
    for index in range(count):
        ident = nvml.identify(index)
        assert ident.uuid.startswith("GPU-") and ident.name
        assert re.fullmatch(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]", ident.pci_bus_id)
        s = nvml.sample(index, processes=True)
        print(index, ident, s)
        assert s.field_errors == ()
        assert s.memory_total_bytes > 2**30
        assert 0 <= s.memory_used_bytes <= s.memory_total_bytes and 0 <= s.memory_free_bytes <= s.memory_total_bytes
        assert 0 < s.temperature_celsius < 120
        assert 0 <= s.utilization_ratio <= 1 and 0 <= s.memory_bandwidth_utilization_ratio <= 1
        assert 0 < s.power_draw_watts < 2 * s.power_limit_watts and 50 < s.power_limit_watts < 2000
        slow = nvml.slow_sample(index)
        print(index, slow)
        assert slow.field_errors == ()
        assert slow.energy_joules > 0
        assert 1e8 < s.sm_clock_hertz < 4e9 and 1e8 < s.memory_clock_hertz < 1e10
        assert 0 <= s.performance_state <= 15
        assert s.clock_event_reasons is not None and s.clock_event_reasons >= 0
        for counter in (s.ecc_corrected_errors, s.ecc_uncorrected_errors, s.pcie_replay_errors):
            assert counter is None or counter >= 0
        assert s.fan_speed_ratio is None or 0 <= s.fan_speed_ratio <= 1
        assert s.processes is not None


def test_energy_only_grows(nvml):
    first = nvml.slow_sample(0).energy_joules
    time.sleep(1.0)
    assert nvml.slow_sample(0).energy_joules >= first


def test_pcie_throughput_and_xid_watch(nvml):
    tp = nvml.pcie_throughput(0)
    for v in (tp.rx_bytes_per_second, tp.tx_bytes_per_second):
        assert v is None or v >= 0
    nvml.watch_xid(range(nvml.device_count()))
    assert isinstance(nvml.wait_xid(0.2), list)


def test_collector_over_real_nvml(nvml, config):
    cfg = config.exporter.model_copy(update={"process_metrics": True, "pcie_throughput": True, "xid_events": True})
    collector, close = build_gpu_collector(cfg)
    try:
        scrapes = [Scrape(collector.collect()), Scrape(collector.collect())]
    finally:
        close()
    for s in scrapes:  # every core series from the first scrape on, energy (a background reading) included
        assert s.value("driftloop_gpu_up") == 1.0
        for name in CORE:
            assert s.gpus(name) == {str(i) for i in range(nvml.device_count())}, name
    assert all(v == 0 for v in collector.errors.values()), collector.errors
    assert s.value("driftloop_gpu_collection_duration_seconds") < cfg.call_timeout_seconds


def test_promtool_on_real_output(nvml, config):
    promtool = require("promtool")
    from prometheus_client import CollectorRegistry, generate_latest
    cfg = config.exporter.model_copy(update={"process_metrics": True})
    collector, close = build_gpu_collector(cfg)
    try:
        registry = CollectorRegistry()
        registry.register(collector)
        text = generate_latest(registry).decode()
    finally:
        close()
    proc = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and not proc.stdout.strip() and not proc.stderr.strip(), proc.stdout + proc.stderr


def test_exporter_end_to_end_with_a_cuda_process(nvml, port, tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch cannot use the GPU here")
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time, torch
        x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")  # 1 GiB
        torch.cuda.synchronize(); print("ready", flush=True); time.sleep(120)
    """)], stdout=subprocess.PIPE, text=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRIFTLOOP_")}
    exporter = subprocess.Popen([sys.executable, "-m", "monitor.cli", "exporter", "--port", str(port),
                                 "--process-metrics", "--pcie-throughput", "--xid-events"], cwd=tmp_path, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"

        def scrape() -> Scrape:
            assert exporter.poll() is None, exporter.communicate(timeout=5)
            return Scrape.from_text(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text)

        def with_the_process() -> tuple[Scrape] | None:
            s = scrape()
            return (s,) if s.find("driftloop_gpu_process_memory_used_bytes", pid=str(holder.pid)) and \
                s.has("driftloop_gpu_pcie_throughput_bytes_per_second") else None

        (s,) = wait_until(with_the_process, 60, 0.5, "no series for the CUDA process", ignoring=(httpx.TransportError,))
        assert s.value("driftloop_gpu_up") == 1.0
        (proc,) = s.find("driftloop_gpu_process_memory_used_bytes", pid=str(holder.pid))
        assert proc.value >= 2**30 and proc.labels["process"]
        holder.kill()
        holder.wait(10)
        wait_until(lambda: not scrape().find("driftloop_gpu_process_memory_used_bytes", pid=str(holder.pid)), 30, 0.5,
                   "the process series outlived the process")
        exporter.send_signal(signal.SIGTERM)
        _, err = exporter.communicate(timeout=20)
        assert exporter.returncode == 0, err
        assert "NVML ready" in err and "Traceback" not in err
    finally:
        for p in (holder, exporter):
            if p.poll() is None:
                p.kill()

