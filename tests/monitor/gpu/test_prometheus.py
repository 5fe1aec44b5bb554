"""A real Prometheus scrapes a running exporter (text and OpenMetrics negotiation included)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, ProcessCollector

from monitor.gpu import build_gpu_collector
from monitor.gpu.server import ExporterServer
from tests.support.prometheus import start_prometheus


def test_prometheus_scrapes_every_gpu_series(config, tmp_path):
    cfg = config.exporter.model_copy(update={"simulate": 3, "process_metrics": True, "pcie_throughput": True})
    collector, close = build_gpu_collector(cfg)
    registry = CollectorRegistry(auto_describe=True)
    registry.register(collector)
    ProcessCollector(registry=registry)
    server = ExporterServer(registry, "127.0.0.1", 0, health=collector.health, poll_interval=0.05).start()
    prom = start_prometheus(tmp_path / "prom", [f"127.0.0.1:{server.port}"], scrape_interval="1s")
    try:
        result = prom.wait_for("driftloop_gpu_utilization_ratio", timeout=30)
        assert {r["metric"]["gpu"] for r in result} == {"0", "1", "2"}
        assert all(r["metric"]["uuid"].startswith("GPU-") for r in result)
        for expr in ("driftloop_gpu_up == 1", "driftloop_gpu_energy_joules_total",
                     'driftloop_gpu_clock_event_active{reason="gpu_idle"}', "driftloop_gpu_info",
                     'driftloop_gpu_ecc_errors_total{type="uncorrected"}', "driftloop_gpu_collection_errors_total",
                     "driftloop_gpu_pcie_throughput_bytes_per_second", "driftloop_gpu_process_memory_used_bytes"):
            assert prom.query(expr) or prom.wait_for(expr, timeout=10), expr
        info = prom.query("driftloop_gpu_info")[0]["metric"]
        assert {"name", "driver_version", "cuda_driver_version", "pci_bus_id"} <= set(info)
        (target,) = prom.targets()
        assert target["health"] == "up" and target["lastError"] == ""
    finally:
        prom.stop()
        server.close()
        close()
