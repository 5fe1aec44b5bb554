"""``driftloop export``: a registered version's ONNX form and its manifest, ready for a model service."""
from __future__ import annotations

import click

from monitor.cli import config_from


@click.command("export")
@click.option("--version", "version", default="champion", show_default=True, metavar="N|ALIAS",
              help="Registered version number, or an alias (champion, challenger, previous-champion).")
@click.option("--format", "fmt", type=click.Choice(["onnx", "onnx-int8"]), default="onnx", show_default=True,
              help="ONNX fp32, or its INT8 quantization.")
@click.option("--out", "out", type=click.Path(file_okay=False), required=True,
              help="Folder to write the model file and manifest.json into (created if missing).")
@click.pass_context
def command(ctx: click.Context, version: str, fmt: str, out: str) -> None:
    """Write a registered version's exported ONNX model (model.onnx or model.int8.onnx) and a
    manifest (feature names and types, task, classes, threshold or prediction column, version)
    into --out.

    The forms were built, parity-checked and timed when the version was registered; a form that
    failed its checks was not published and this says why. Score the folder without torch with
    monitor.onnx_scoring.OnnxScorer.from_dir(OUT, FORMAT): its predict returns what the pyfunc
    returns for the model's task (P(1); class and proba_<class> columns; the value).
    """
    cfg = config_from(ctx)
    from monitor.onnx_scoring import FORMATS, MANIFEST
    from trainer import copy_published

    target, name, number = copy_published(cfg, version, fmt, out)
    click.echo(f"Wrote {target / FORMATS[fmt]} and {target / MANIFEST} ({name} v{number}, {fmt})")
