"""``driftloop export``: a registered version's ONNX form and its manifest, ready for a model service."""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import click

from monitor.cli import config_from
from monitor.errors import UserInputError


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
    manifest (feature names and types, threshold, version) into --out.

    The forms were built, parity-checked and timed when the version was registered; a form that
    failed its checks was not published and this says why. Score the folder without torch with
    monitor.onnx_scoring.OnnxScorer.from_dir(OUT, FORMAT).
    """
    cfg = config_from(ctx)
    from monitor.onnx_scoring import FORMATS, MANIFEST, download_published
    from trainer import registry as reg

    reg.check_reachable(cfg)
    with reg.session(cfg), reg.translating(cfg, "exporting a model version"):
        registry = reg.Registry(cfg)
        number = version if version.isdigit() else registry.alias_version(version)
        if number is None:
            raise UserInputError(f"registered model {registry.name!r} has no version or alias {version!r}")
        with tempfile.TemporaryDirectory() as tmp:
            folder = download_published(registry.client, cfg.tracking_uri, registry.name, number, fmt, tmp)
            manifest = json.loads((folder / MANIFEST).read_text())
            target = Path(out)
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder / FORMATS[fmt], target / FORMATS[fmt])
    manifest.update({"version": number, "format": fmt, "file": FORMATS[fmt],
                     "registered_model": registry.name})
    manifest.pop("formats", None)
    (target / MANIFEST).write_text(json.dumps(manifest, indent=2))
    click.echo(f"Wrote {target / FORMATS[fmt]} and {target / MANIFEST} ({registry.name} v{number}, {fmt})")
