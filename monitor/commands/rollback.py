"""``driftloop rollback``: move the champion alias back to the previous champion."""
from __future__ import annotations

import click

from monitor.cli import config_from


@click.command("rollback")
@click.pass_context
def command(ctx: click.Context) -> None:
    """Move alias 'champion' back to the previous champion (repeatable: each call goes one further back).

    The daemon picks the change up at its next check and switches to that version's baseline.
    """
    cfg = config_from(ctx)
    from trainer import rollback
    moved_from, moved_to = rollback(cfg)
    click.echo(f"Champion of {cfg.registered_model_name}: v{moved_from} -> v{moved_to}")
