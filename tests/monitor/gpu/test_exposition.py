"""Our faster writer must produce exactly what prometheus_client writes, in every negotiated format."""
from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Histogram, Info, ProcessCollector, Summary
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import choose_encoder

from monitor.gpu import build_gpu_collector
from monitor.gpu.exposition import Encoder

ACCEPTS = [
    "",
    "text/plain; version=0.0.4",
    "application/openmetrics-text; version=1.0.0",
    "application/openmetrics-text; version=0.0.1",
    "application/openmetrics-text; version=1.0.0; escaping=allow-utf-8",
    # What Prometheus 2.42 sends:
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
]


class Frozen:
    """Serves the same families to both writers."""

    def __init__(self, families):
        self.families = families

    def collect(self):
        return self.families


@pytest.fixture
def families(config):
    cfg = config.exporter.model_copy(update={"simulate": 3, "process_metrics": True, "pcie_throughput": True})
    collector, close = build_gpu_collector(cfg)
    other = CollectorRegistry()
    ProcessCollector(registry=other)
    Histogram("h_seconds", "A histogram.", ["path"], registry=other).labels("/x").observe(0.3)
    Summary("s_seconds", "A summary.", registry=other).observe(2)
    Counter("c", "A counter with _created.", registry=other).inc()
    Info("build", "Build info.", registry=other).info({"version": "1.2"})
    Enum("state", "An enum.", states=["a", "b"], registry=other).state("b")
    g = Gauge("g_ratio", "Help with \\ backslash\nand newline and \"quotes\".", ["v"], registry=other)
    g.labels('quote " back \\ new\nline é').set(float("nan"))
    odd = GaugeMetricFamily("odd_gauge", "Values at the edges.", labels=["k"])
    odd.add_metric(["inf"], float("inf"))
    odd.add_metric(["big"], 123456789012.0)
    odd.add_metric(["neg"], -0.0)
    stamped = GaugeMetricFamily("stamped", "A sample with a timestamp.", labels=["k"])
    stamped.add_metric(["t"], 1.0, timestamp=1700000000.5)
    try:
        yield list(collector.collect()) + list(other.collect()) + [odd, stamped]
    finally:
        close()


@pytest.mark.parametrize("accept", ACCEPTS)
def test_byte_for_byte_what_prometheus_client_writes(families, accept):
    frozen = Frozen(families)
    library, library_type = choose_encoder(accept)
    encoder = Encoder()
    for _ in range(2):  # a second pass is served from the label cache
        body, content_type = encoder.encode(frozen, accept)
        assert content_type == library_type
        assert body.decode() == library(frozen).decode()
