"""``driftloop baseline-constraints``: the constraints file suggested from the champion's baseline."""
from __future__ import annotations

import json
from pathlib import Path

import click

from monitor.cli import config_from
from monitor.commands._schema import with_champion_schema
from monitor.errors import UserInputError


@click.command("baseline-constraints")
@click.option("--out", "out", type=click.Path(dir_okay=False, allow_dash=True), default=None, metavar="PATH",
              help="Where to write the file ('-': print it). Default: the file the checks read (drift.constraints, "
                   "else constraints/<model>.json under home).")
@click.option("--max-categories", type=click.IntRange(1, 10_000), default=100, show_default=True,
              help="List a categorical column's categories when its baseline has at most this many (more: the "
                   "column's categories are not checked until you list them).")
@click.option("--force", is_flag=True, help="Replace an existing file (its edits are lost).")
@click.pass_context
def command(ctx: click.Context, out: str | None, max_categories: int, force: bool) -> None:
    """Write the constraints each check holds the window to, suggested from the current champion's
    baseline (its reference sample): per column (features, score, prediction, label) its type,
    completeness, range (min, max, is_non_negative) and categories, with a version header and the
    champion version. Edit the JSON to widen a range, add categories, drop a column or turn a check
    off; every check then reports the violations (driftloop check, /v1/status, the report, /metrics)."""
    cfg = with_champion_schema(config_from(ctx))
    import trainer
    from monitor.drift import suggest_constraints, write_constraints

    champion = trainer.load_champion(cfg)
    reference = champion.baseline.reference
    body = suggest_constraints(reference, cfg.model, champion_version=str(champion.version),
                               window_rows=cfg.drift.window_size, max_categories=max_categories)
    if out == "-":
        click.echo(json.dumps(body, indent=2))
        return
    used = cfg.constraints_path
    path = Path(out) if out else used
    if path is None:
        raise UserInputError("drift.constraints is off (''): give --out PATH, or set drift.constraints")
    if path.exists() and not force:
        raise UserInputError(f"{path} exists (edited by hand, perhaps): --force replaces it, --out PATH writes "
                             "another file")
    write_constraints(body, path)
    click.echo(f"Wrote {path}: constraints on {len(body['columns'])} columns of model {cfg.model.name!r} from "
               f"champion v{champion.version}'s baseline ({len(reference)} rows).")
    if used is not None and path.resolve() == used.resolve():
        click.echo("The checks use it from the next one on.")
    else:
        click.echo(f"The checks read {used if used is not None else 'no file (drift.constraints is off)'}: set "
                   "drift.constraints to this file (relative to home) for them to use it.")
