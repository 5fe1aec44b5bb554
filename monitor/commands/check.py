"""``driftloop check``: one drift and performance evaluation now, printed."""
from __future__ import annotations

import json
import time

import click

from monitor.cli import config_from
from monitor.commands._schema import with_champion_schema
from monitor.errors import DriftloopError, RegistryError


@click.command("check")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--no-report", is_flag=True, help="Do not save the Evidently report (HTML + JSON) under home/reports.")
@click.option("--fail-on-breach", is_flag=True,
              help="Exit with code 3 when the task's default metrics (accuracy, ROC AUC; regression: MAE) or an "
                   "alerts.rules metric breaches its threshold (for scripts and CI).")
@click.pass_context
def command(ctx: click.Context, as_json: bool, no_report: bool, fail_on_breach: bool) -> int:
    """Evaluate the current window against the daemon's bar and print the result.

    The window is the last drift.window_size predictions (or drift.window_seconds). Accuracy and
    ROC AUC (regression: MAE) are judged as the daemon judges them: against the champion's
    baseline raised to the reference level the loop keeps (a retrained champion must earn back
    the level its predecessor had before the drift). This reads the store and the registry and
    writes only the report files: it does not record the check, set the level, open incidents
    or retrain (the running daemon does that).
    """
    cfg = config_from(ctx)
    cfg = with_champion_schema(cfg)

    from monitor.daemon.runtime.facade import (AlertPolicy, CheckJob, ReferenceLevels, check_rules_fit,
                                               default_champion, history_citations, render_check)
    check_rules_fit(cfg)  # the champion's task is known now
    from monitor.drift import HistoryPolicy, evaluate_window, prune_history, save_report
    from monitor.records.inputs import InputRoots
    from monitor.store import PredictionStore

    def save(result, ts):
        if no_report:
            return None, None
        paths = save_report(result, cfg.reports_dir, max_bytes=cfg.drift.report_max_bytes,
                            roots=InputRoots.of(cfg.model))
        # The reports only: the workspace's index is the daemon's to write.
        prune_history(cfg.model.name, HistoryPolicy.from_config(cfg.drift), ts,
                      history_citations(store.engine, cfg.model.name), reports_dir=cfg.reports_dir)
        return tuple(paths)

    store = PredictionStore.from_config(cfg)
    try:
        outcome = CheckJob(cfg, store, default_champion(cfg), evaluate_window, save, time.time).run()
        # The daemon's bar: the reference level it would judge this champion against (read, not set).
        level = ReferenceLevels(store.engine, cfg.model.name).peek(outcome) if outcome.result is not None else None
    finally:
        store.close()
    breaches = None
    suspected: list = []
    segments: list = []
    if outcome.result is not None:
        policy = AlertPolicy(cfg.alerts, cfg.drift.min_labels)
        observed = _observation(outcome, level)
        segments = policy.segment_breaches(observed)
        breaches = policy.performance_breaches(observed)
        if breaches is None:  # no labels to judge: what the estimate alone says
            suspected = (policy.estimated_breaches(observed) or ([], True))[0]
    if as_json:
        body = outcome.to_dict()
        body["breaches"] = None if breaches is None else [b.key for b in breaches]
        body["suspected"] = [b.key for b in suspected]
        body["segment_breaches"] = [b.segment for b in segments]
        body["reference_level"] = None if level is None else level._asdict()
        click.echo(json.dumps(body, indent=2, default=str))
    else:
        click.echo(render_check(outcome, breaches, level))
        for b in suspected:
            click.echo(f"SUSPECTED  {b.describe()} (labels will confirm or clear it)")
        for b in segments:
            click.echo(f"SEGMENT    {b.describe()}")
    if outcome.status == "no_champion":
        raise RegistryError(outcome.message)
    if outcome.status == "error":
        raise DriftloopError(outcome.message)
    if fail_on_breach and breaches:
        return 3
    return 0


def _observation(outcome, level=None):
    from monitor.daemon.runtime.facade import observation
    return observation(outcome, level)
