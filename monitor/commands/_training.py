"""What ``train`` and ``retrain`` share: running the training call and the JSON/interrupted exits."""
from __future__ import annotations

import json
from typing import Any, Callable

import click


def run_training(ctx: click.Context, call: Callable[[], Any], as_json: bool) -> Any | None:
    """The outcome to print as text, or None when nothing is left to print: a torchrun rank other
    than 0 (rank 0 reports), or ``--json`` (printed here). SIGTERM/SIGINT exits 75 after a checkpoint."""
    from trainer import EXIT_INTERRUPTED, TrainingInterrupted

    try:
        outcome = call()
    except TrainingInterrupted as exc:
        click.echo(f"Interrupted: {exc}", err=True)
        ctx.exit(EXIT_INTERRUPTED)
    if outcome is None:
        return None
    if as_json:
        click.echo(json.dumps(outcome.to_dict(), indent=2))
        return None
    return outcome
