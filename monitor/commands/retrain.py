"""``driftloop retrain``: one incremental retrain now, on the store's recent labelled window or a file."""
from __future__ import annotations

import logging
from typing import Any

import click

from monitor.cli import config_from
from monitor.commands._schema import with_champion_schema
from monitor.commands._training import run_training


@click.command("retrain")
@click.option("--data", "data_path", type=click.Path(dir_okay=False), default=None,
              help="Retrain on this CSV/Parquet file instead of the store's labelled window.")
@click.option("--last-n", type=int, default=None,
              help="Newest N labelled predictions from the store [default: alerts.retrain_rows or drift.window_size].")
@click.option("--trigger", type=click.Choice(["manual", "alert", "schedule"]), default="manual", show_default=True)
@click.option("--incident-id", default=None, help="Incident this retrain answers (tagged on the run).")
@click.option("--report", "reports", multiple=True, type=click.Path(dir_okay=False),
              help="Evidently report to attach to the run (repeatable).")
@click.option("--resume", is_flag=True, help="Continue an interrupted retrain from its last checkpoint.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar; the epoch lines at DEBUG.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.pass_context
def command(ctx: click.Context, data_path: str | None, last_n: int | None, trigger: str, incident_id: str | None,
            reports: tuple[str, ...], resume: bool, quiet: bool, as_json: bool) -> None:
    """Warm-start the champion on recent labelled data (plus a replay of its reference sample),
    compare on held-out recent rows, and promote the challenger only if it is better.

    A rejected challenger is still registered (alias 'challenger') with its reasons as tags.
    Exit status 0 for promoted and rejected alike; 75 when interrupted (use --resume).
    """
    cfg = config_from(ctx, {"training": {"progress": False}} if quiet else None)
    cfg = with_champion_schema(cfg)

    from monitor.errors import UserInputError
    from monitor.store import labelled_window
    from trainer import load_window, retrain

    if data_path and last_n:
        raise UserInputError("give --data or --last-n, not both")
    if last_n is not None and last_n < 1:
        raise UserInputError(f"--last-n must be a positive number, got {last_n}")
    if data_path:
        spec: dict[str, Any] = {"source": "file", "path": data_path}
    else:
        rows = last_n or cfg.alerts.retrain_rows or cfg.drift.window_size
        spec = {"source": "store", "last_n": rows}
    window = load_window(cfg, spec, store_window=labelled_window)
    outcome = run_training(ctx, lambda: _recorded(cfg, retrain(cfg, window, trigger=trigger, incident_id=incident_id,
                                                              report_paths=reports, data_window=spec, resume=resume),
                                                  trigger, incident_id, len(window), spec), as_json)
    if outcome is None:
        return
    m = outcome.metrics
    task = cfg.model.kind
    first, second = ((task.metric_label(name), name) for name in task.lead_metrics)
    click.echo(f"{outcome.outcome.upper()}: challenger v{outcome.challenger_version} vs champion "
               f"({first[0]} {m['challenger_' + first[1]]:.4f} vs {m['champion_' + first[1]]:.4f}, {second[0]} "
               f"{m['challenger_' + second[1]]:.4f} vs {m['champion_' + second[1]]:.4f} on {int(m['holdout_rows'])} "
               f"held-out rows); champion is v{outcome.champion_version}")
    for reason in outcome.reasons:
        click.echo(f"  - {reason}")


def _recorded(cfg: Any, outcome: Any, trigger: str, incident_id: str | None, rows: int, spec: dict) -> Any:
    """``outcome``, after writing it to the store's retrain attempts like a daemon retrain, so it
    shows in ``driftloop status``, ``GET /v1/status`` and ``driftloop_retrains_total``. The
    retrain itself is done: a store that cannot take the record costs a warning, not the exit code."""
    if outcome is None:  # a torchrun rank other than 0
        return outcome
    import time

    from sqlalchemy.exc import SQLAlchemyError

    from monitor.daemon.runtime.facade import AttemptStore
    from monitor.errors import DriftloopError
    from monitor.store import state_engine

    try:
        with state_engine(cfg) as engine:  # the attempts' table alone: the model's tables are the daemon's
            attempts = AttemptStore(engine, cfg.model.name, time.time)
            attempt = attempts.begin(incident_id or "", trigger, rows=rows, data_window=spec)
            attempts.finish(attempt.id, outcome.outcome, run_id=outcome.run_id,
                            challenger_version=outcome.challenger_version, champion_version=outcome.champion_version,
                            duration_seconds=outcome.duration_seconds, samples_per_second=outcome.samples_per_second,
                            reasons=list(outcome.reasons))
    except (DriftloopError, SQLAlchemyError) as exc:
        logging.getLogger(__name__).warning("retrain done but not recorded in the store: %s", exc)
    return outcome
