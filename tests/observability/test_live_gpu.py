"""The GPU dashboard and GPU alerts against a real Prometheus loaded with our rules, scraping two real
exporters: `driftloop exporter --simulate 2` (a subprocess, as users run it) and an in-process exporter
on the fake NVML backend (the hardware boundary), into which we inject faults: heat, a hardware
slowdown, an ECC error, XID events, a lost GPU, NVML going away."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest
from prometheus_client import CollectorRegistry

from monitor.config import ExporterConfig
from monitor.gpu import build_gpu_collector
from monitor.gpu.fake import FakeBackend
from monitor.gpu.server import ExporterServer
from tests.conftest import free_port
from tests.support.services import wait_answering
from tests.support.waiting import wait_until
from scripts import docs_gen
from tests.observability.live import (alerts, empty_queries, rule_selectors_without_data, start_like_ours,
                                      unrendered_annotations, wait_alert, wait_rules_evaluated)
from tests.observability.promql import load_dashboards, load_rules

pytestmark = pytest.mark.slow

GPU_RULES = {r["alert"] for r in load_rules() if r.get("labels", {}).get("component") == "gpu"}



def recorded_as_read(prom, recorded: str, raw: str, scale: float) -> int:
    """How many series of the recording rule ``recorded`` equal ``raw / scale`` as it stood when the
    rule evaluated: ``raw`` queried at the recorded sample's own time, for the same instance and gpu."""
    matched = 0
    for series in prom.query(recorded):
        ts, value, labels = float(series["value"][0]), float(series["value"][1]), series["metric"]
        selector = ",".join(f'{k}="{labels[k]}"' for k in ("instance", "gpu") if k in labels)
        read = prom.query(f"{raw}{{{selector}}}", time_=ts)
        matched += bool(read) and abs(float(read[0]["value"][1]) / scale - value) < 1e-9
    return matched

class FakeExporter:
    """An exporter on the fake backend, served in this process."""

    def __init__(self) -> None:
        self.backend = FakeBackend(gpus=2)
        cfg = ExporterConfig(xid_events=True, process_metrics=True, pcie_throughput=True, sampler_interval_seconds=0.2,
                             init_retry_initial_seconds=0.2, init_retry_max_seconds=0.5)
        self.collector, self._close = build_gpu_collector(cfg, backend=self.backend)
        registry = CollectorRegistry()
        registry.register(self.collector)
        self.server = ExporterServer(registry, "127.0.0.1", 0, health=self.collector.health).start()
        self.target = f"127.0.0.1:{self.server.port}"

    def close(self) -> None:
        self.server.close()
        self._close()


def _wait_http(url: str, proc: subprocess.Popen, timeout: float = 30) -> None:
    wait_answering(url, proc, lambda: proc.stderr.read() if proc.stderr and proc.poll() is not None else "",
                   timeout, name="the simulated exporter")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("live-gpu")
    port = free_port()
    sim = subprocess.Popen([sys.executable, "-m", "monitor.cli", "exporter", "--simulate", "2", "--port", str(port),
                            "--process-metrics", "--pcie-throughput", "--xid-events"],
                           cwd=workdir, stdout=subprocess.DEVNULL, stderr=open(workdir / "exporter.log", "wb"),
                           env={"PATH": "/usr/bin:/bin", "DRIFTLOOP_EXPORTER__SAMPLER_INTERVAL_SECONDS": "0.5"})
    fake = FakeExporter()
    prom = None
    try:
        _wait_http(f"http://127.0.0.1:{port}/metrics", sim)
        prom = start_like_ours(workdir / "prometheus", {"driftloop-gpu": [f"127.0.0.1:{port}", fake.target]})
        yield {"prom": prom, "sim": sim, "sim_target": f"127.0.0.1:{port}", "fake": fake, "started": time.time()}
    finally:
        if prom is not None:
            prom.stop()
        fake.close()
        if sim.poll() is None:
            sim.terminate()
            sim.wait(10)


def test_gpu_dashboard_queries_and_gpu_alerts(stack):
    prom, fake = stack["prom"], stack["fake"]
    backend: FakeBackend = fake.backend
    # Both exporters scraped: 2 simulated GPUs, 2 fake ones, with their background PCIe readings.
    assert prom.wait_for("count(driftloop_gpu_info) == 4", timeout=30), "not all GPUs scraped"
    assert prom.wait_for("count(driftloop_gpu_pcie_throughput_bytes_per_second) == 8", timeout=15)

    # Faults, one at a time as the hardware would produce them.
    backend.start_process(0, 4242, "train.py", 3 * 2**30)
    backend.emit_xid(0, 79)
    assert prom.wait_for('driftloop_gpu_xid_errors_total{xid="79"} == 1', timeout=15)
    backend.emit_xid(0, 79)  # a second one: the counter increases within Prometheus' window
    backend.set(0, temperature_celsius=91.0, clock_event_reasons=0x040, ecc_uncorrected_errors=2.0)
    # Prometheus has scraped the second Xid and the new readings before GPU 1 is lost.
    assert prom.wait_for('driftloop_gpu_xid_errors_total{xid="79"} == 2', timeout=15)
    assert prom.wait_for('driftloop_gpu_temperature_celsius{gpu="0"} == 91', timeout=15)
    backend.lose(1)

    wait_alert(prom, "DriftloopGpuTooHot", instance=fake.target, gpu="0")
    wait_alert(prom, "DriftloopGpuHardwareSlowdown", instance=fake.target, gpu="0", reason="hw_thermal_slowdown")
    assert wait_alert(prom, "DriftloopGpuUncorrectedEccErrors", gpu="0")["state"] == "firing"  # no `for`
    assert wait_alert(prom, "DriftloopGpuXidErrors", gpu="0", xid="79")["state"] == "firing"
    missing = wait_alert(prom, "DriftloopGpuMissing", instance=fake.target)
    assert missing["labels"]["uuid"] == "GPU-fake-0001" and missing["labels"]["name"] == "NVIDIA Fake H100"
    wait_alert(prom, "DriftloopGpuCollectionFailing", instance=fake.target, gpu="1")
    # The simulated GPUs are healthy: nothing about them.
    assert not [a for a in alerts(prom) if a["labels"].get("instance") == stack["sim_target"]]

    # Every GPU dashboard query returns data for what has been scraped so far.
    end = time.time()
    board = load_dashboards()["gpu-fleet.json"]
    assert empty_queries(prom, "gpu-fleet.json", board, stack["started"], end) == []

    # dcgm-exporter's names, recorded from the same series with its labels and units.
    assert prom.wait_for('count(DCGM_FI_DEV_GPU_UTIL{modelName="Simulated GPU", Hostname!="", device=~"nvidia[01]"}) '
                         '== 2',
                         timeout=15)
    assert prom.wait_for('count(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{modelName="NVIDIA Fake H100"} == 0.6) >= 1', timeout=15)
    # Compared where the rule read it: at one instant the two can straddle a scrape of a reading that
    # changes every scrape (the simulated GPUs' memory), and the two exporters are scraped out of phase.
    assert wait_until(lambda: recorded_as_read(prom, "DCGM_FI_DEV_FB_USED", "driftloop_gpu_memory_used_bytes",
                                               1048576) >= 3, timeout=15, interval=0.5)

    # Every GPU rule evaluates cleanly, on series that exist.
    rules = wait_rules_evaluated(prom)
    assert GPU_RULES <= set(rules)
    assert {n: r.get("lastError") for n, r in rules.items() if r["health"] != "ok"} == {}
    assert rule_selectors_without_data(prom, GPU_RULES, stack["started"], end) == []

    # The driver goes away on the fake node; the simulated exporter process dies.
    backend.available = False
    wait_alert(prom, "DriftloopGpuNvmlDown", instance=fake.target)
    stack["sim"].terminate()
    stack["sim"].wait(10)
    wait_alert(prom, "DriftloopGpuExporterDown", instance=stack["sim_target"])
    # What the alerts say renders real values (GET /api/v1/alerts), links included.
    active = alerts(prom)
    assert len({a["labels"]["alertname"] for a in active}) >= 7
    assert unrendered_annotations(prom) == []
    assert all(a["annotations"]["runbook_url"] == docs_gen.runbook_url(a["labels"]["alertname"],
                                                                   instance=a["labels"].get("instance"))
               for a in active)
