"""A registered version's published ONNX form, copied out of MLflow with its manifest: what
``driftloop export`` writes (moved here from monitor/commands/export.py so that the command uses the
trainer's package API instead of the registry's insides)."""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from monitor.errors import UserInputError
from monitor.onnx_scoring import FORMATS, MANIFEST, download_published
from trainer import registry as reg


def copy_published(cfg: Any, version: str, fmt: str, out: str | Path) -> tuple[Path, str, str]:
    """Write ``version``'s (a number or an alias) form ``fmt`` and a manifest into ``out``;
    returns ``(folder, registered model name, version number)``."""
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
    return target, registry.name, number
