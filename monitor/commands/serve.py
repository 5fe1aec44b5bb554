"""``driftloop serve``: the daemon (ingestion API, /metrics, drift job, alerts, retraining)."""
from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Any

import click

from monitor.cli import config_from
from monitor.commands._schema import with_champion_schema


@click.command("serve")
@click.option("--host", default=None, help="Address to listen on [default: server.host, 127.0.0.1].")
@click.option("--port", type=int, default=None, help="Port to listen on [default: server.port, 8470].")
@click.option("--health-port", type=int, default=None,
              help="Answer GET /livez on this port too, from a process load cannot hold up [default: "
                   "server.health_port, none].")
@click.option("--simulate-gpus", type=int, default=None, metavar="N",
              help="Serve N simulated GPUs on /metrics instead of reading NVML.")
@click.option("--no-gpu", is_flag=True, default=False, help="No GPU metrics on /metrics (server.gpu_metrics=false).")
@click.option("--check-interval", type=float, default=None, metavar="SECONDS",
              help="Seconds between drift/performance checks [default: drift.interval_seconds, 300].")
@click.pass_context
def command(ctx: click.Context, host: str | None, port: int | None, health_port: int | None,
            simulate_gpus: int | None, no_gpu: bool,
            check_interval: float | None) -> None:
    """Run the daemon until SIGTERM or Ctrl-C.

    One process: the HTTP API (/v1/predictions, /v1/labels, /v1/alerts, /v1/retrain,
    /v1/status, /metrics, /healthz, OpenAPI at /docs), the scheduled drift and performance
    check, the alert policy and incidents, and retraining in a child process. A configuration
    of several models (models: or models_dir:) serves them all, each at /v1/models/NAME/...;
    SIGHUP rereads it (models added start, removed ones stop, the others are not touched).
    """
    server: dict[str, Any] = {"host": host, "port": port, "health_port": health_port}
    if no_gpu:
        server["gpu_metrics"] = False
    overrides: dict[str, Any] = {"server": {k: v for k, v in server.items() if v is not None}}
    if simulate_gpus is not None:
        overrides["exporter"] = {"simulate": simulate_gpus}
        if simulate_gpus and not no_gpu:
            overrides["server"]["gpu_metrics"] = True  # asking for simulated GPUs means showing them
    if check_interval is not None:
        overrides["drift"] = {"interval_seconds": check_interval}
    cfg = config_from(ctx, overrides, whole=True)

    from monitor.daemon.runtime.facade import install_signal_handlers, serve  # after config: --help stays fast

    stop, reload = threading.Event(), threading.Event()
    install_signal_handlers(stop, reload)
    # Every model, each checked against its champion's schema; SIGHUP rereads the file (models added
    # start, removed ones stop, the others are not touched).
    serve(cfg, stop, freeze_heap=True, prepare=with_champion_schema, reload=reload,  # this process is the daemon alone
          reload_config=lambda: config_from(ctx, overrides, whole=True))
    # Everything is stopped and closed by now. Finalising the interpreter (torch, pandas, MLflow and
    # their C extensions) would take another second or more, which a supervisor restarting us at
    # once waits on; a clean exit needs none of it. Flush the logs and leave.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
