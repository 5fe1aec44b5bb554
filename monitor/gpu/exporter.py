"""``driftloop exporter``'s body: a registry with the GPU collector, served over HTTP(S) until stopped."""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from monitor.buildinfo import register_self_metrics

from monitor.gpu import build_gpu_collector
from monitor.gpu.server import ExporterServer

if TYPE_CHECKING:
    from monitor.config import ExporterConfig

log = logging.getLogger(__name__)


def run_exporter(cfg: "ExporterConfig", stop: threading.Event, ready: threading.Event | None = None) -> None:
    """Serve until ``stop`` is set. Binding the port comes first, so a port in use fails fast."""
    registry = CollectorRegistry(auto_describe=True)
    server = ExporterServer(registry, cfg.host, cfg.port, tls_cert=cfg.tls_cert, tls_key=cfg.tls_key)
    try:
        collector, close = build_gpu_collector(cfg)
    except BaseException:
        server.close()
        raise
    try:
        registry.register(collector)
        register_self_metrics(registry, "exporter")  # its own process_*, python_* and driftloop_build_info
        server.health = collector.health  # type: ignore[method-assign]
        server.start()
        mode = f"{cfg.simulate} simulated GPU(s)" if cfg.simulate else "NVML"
        extras = [name for name, on in (("process metrics", cfg.process_metrics),
                                        ("PCIe throughput", cfg.pcie_throughput), ("XID events", cfg.xid_events)) if on]
        log.info("GPU exporter (%s%s) serving %s/metrics", mode, f"; {', '.join(extras)}" if extras else "",
                 server.url)
        if ready is not None:
            ready.set()
        while not stop.wait(1.0):
            pass
        log.info("stopping")
    finally:
        server.close()
        close()
