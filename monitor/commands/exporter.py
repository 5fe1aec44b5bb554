"""``driftloop exporter``: the GPU exporter alone, one per GPU node, scraped by Prometheus."""
from __future__ import annotations

import signal
import threading
from typing import Any

import click

from monitor.cli import config_from


@click.command("exporter")
@click.option("--host", default=None, help="Address to listen on [default: exporter.host, 127.0.0.1].")
@click.option("--port", type=int, default=None, help="Port to listen on [default: exporter.port, 9471].")
@click.option("--simulate", type=int, default=None, metavar="N",
              help="Serve N simulated GPUs instead of reading NVML (demos, dashboards).")
@click.option("--tls-cert", type=click.Path(dir_okay=False), default=None, help="Serve HTTPS with this certificate.")
@click.option("--tls-key", type=click.Path(dir_okay=False), default=None, help="Private key for --tls-cert.")
@click.option("--process-metrics/--no-process-metrics", default=None,
              help="Export device memory per process (labels pid, process).")
@click.option("--pcie-throughput/--no-pcie-throughput", default=None,
              help="Export PCIe throughput, sampled in a background thread.")
@click.option("--xid-events/--no-xid-events", default=None, help="Count XID errors from NVML events.")
@click.pass_context
def command(ctx: click.Context, **flags: Any) -> None:
    """Run the GPU exporter: NVML (or --simulate N) to /metrics for Prometheus.

    Starts without a GPU driver too: it then serves driftloop_gpu_up 0 and keeps
    trying to initialise NVML with backoff.
    """
    overrides = {k: v for k, v in flags.items() if v is not None}
    cfg = config_from(ctx, {"exporter": overrides} if overrides else None, whole=True)

    from monitor.gpu.exporter import run_exporter  # after config, so --help stays fast

    stop = threading.Event()

    def _stop(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    run_exporter(cfg.exporter, stop)
