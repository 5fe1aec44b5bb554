"""``driftloop demo``: the whole loop end to end on embedded defaults; ``--example digits`` runs it
with a CNN of the user's kind (examples/digits: image files, ``training.entrypoint``, embeddings)."""
from __future__ import annotations

import importlib
import logging
import os
import socket
import sys
import warnings
from pathlib import Path
from typing import Any

import click

from monitor.cli import config_from, log_level_given


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


@click.command("demo")
@click.option("--home", type=click.Path(file_okay=False, path_type=Path), default=Path("driftloop-demo"),
              show_default=True, help="Folder for the demo's store, MLflow, reports (emptied on each run).")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="API port [default: server.port, or a free one if that is taken; 0 = any free port].")
@click.option("--fast", is_flag=True, help="A smaller, quicker variant (the one CI runs).")
@click.option("--keep-serving", is_flag=True, help="Leave the daemon running afterwards for Prometheus/Grafana.")
@click.option("--example", type=click.Choice(["tabular", "digits"]), default="tabular", show_default=True,
              help="tabular: synthetic rows and driftloop's own network; digits: 8x8 digit images, a CNN "
                   "trained through training.entrypoint, its embedding watched for drift, rotated digits "
                   "(the examples package installed with driftloop).")
@click.option("--models", "models", type=click.IntRange(1, 2), default=1, show_default=True,
              help="Models in the one daemon. 2: a classifier (churn) and a regressor (demand), each with its "
                   "own traffic; only churn's drifts, and only churn opens an incident, retrains and promotes.")
@click.pass_context
def command(ctx: click.Context, home: Path, port: int | None, fast: bool, keep_serving: bool, example: str,
            models: int) -> None:
    """Train a baseline, replay drifting traffic through the real API, and watch the daemon
    detect the drift, retrain, promote and recover. The whole run takes about a minute on a 2-core
    machine (``--example digits``: a few minutes)."""
    from monitor.demo import DemoPlan, demo_config, prepare_home, run_demo

    base = config_from(ctx, whole=True)
    if not log_level_given(ctx):
        # The timeline is the demo's output; the parts' INFO lines would drown it.
        logging.getLogger().setLevel(logging.WARNING)
        for name in ("apscheduler", "apscheduler.scheduler", "apscheduler.executors"):
            logging.getLogger(name).setLevel(logging.ERROR)
        logging.getLogger("monitor.daemon").setLevel(logging.ERROR)  # its events are the timeline's last column
    plan = DemoPlan.fast() if fast else DemoPlan()
    if port is None:
        port = base.server.port if _port_free(base.server.host, base.server.port) else 0
    if port == 0:
        with socket.socket() as s:
            s.bind((base.server.host, 0))
            port = s.getsockname()[1]
    if models == 2 and example != "tabular":
        raise click.UsageError("--models 2 runs the tabular example (a classifier and a regressor)")
    if example == "digits":
        # The service thread loads each new champion from MLflow; its progress bars would cut the timeline.
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        warnings.filterwarnings("ignore", category=UserWarning, module="mlflow")  # hints about its own inference
        loop = _digits_loop()
        digits_plan = loop.DigitsPlan.fast() if fast else loop.DigitsPlan()
        prepare_home(home)
        outcome = loop.run_demo(loop.digits_config(home, port, digits_plan, base=base), digits_plan, echo=click.echo,
                                keep_serving=keep_serving)
        if not outcome.promotions:
            raise click.ClickException("the demo ended without a promotion; see the timeline above")
        return
    prepare_home(home)
    if models == 2:
        _two_models(home, port, plan, base, keep_serving)
        return
    cfg = demo_config(home, port, plan, base=base)
    result = run_demo(cfg, plan, echo=click.echo, keep_serving=keep_serving)
    if not result.promoted_versions:
        raise click.ClickException("the demo ended without a promotion; see the timeline above")


def _two_models(home: Path, port: int, plan: Any, base: Any, keep_serving: bool) -> None:
    """``--models 2`` (monitor/demo_models.py): fails unless the drifted model promoted a new
    champion and the other opened no incident."""
    from monitor.demo_models import models_config, run_models_demo

    # Each model service loads its champion from MLflow: no progress bars or schema hints in the timeline.
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    warnings.filterwarnings("ignore", category=UserWarning, module="mlflow")
    result = run_models_demo(models_config(home, port, plan, base=base), plan, echo=click.echo,
                             keep_serving=keep_serving)
    missed = [m.name for m in result.models.values() if m.drifted and not m.promoted_versions]
    alarmed = [m.name for m in result.models.values() if not m.drifted and m.incidents]
    if missed or alarmed:
        raise click.ClickException("the demo did not end as it should: "
                                   + "; ".join([*(f"{n} drifted and promoted no new champion" for n in missed),
                                                *(f"{n} did not drift and opened an incident" for n in alarmed)])
                                   + "; see the timeline above")


def _digits_loop() -> Any:
    """examples/digits/loop.py: installed with driftloop (the ``examples`` package), or, in a source
    checkout whose installation predates that, imported from the current folder as ``uvicorn`` finds
    an app; the retrain child imports the entrypoint the same way (its PYTHONPATH holds the folder
    above ``monitor``, where ``examples`` lies in both cases)."""
    try:
        return importlib.import_module("examples.digits.loop")
    except ImportError as first:
        if str(Path.cwd()) in sys.path:
            raise click.ClickException(f"--example digits cannot import driftloop's examples package: "
                                       f"{first}") from first
    sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module("examples.digits.loop")
    except ImportError as exc:
        raise click.ClickException(f"--example digits cannot import driftloop's examples package (install "
                                   f"driftloop again, or run it from a source checkout): {exc}") from exc
