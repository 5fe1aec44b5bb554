"""The feature schema the champion was trained with, as ``driftloop train`` recorded it on its run:
what the CLI checks the configured features against (``monitor/commands/_schema.py``), in one call
so that the commands use the trainer's package API instead of the registry's insides."""
from __future__ import annotations

from typing import Any

from trainer import registry as reg


def champion_schema(cfg: Any) -> tuple[str | None, str, tuple[dict, dict] | None]:
    """``(champion version or None, registered model name, (features, columns) recorded or None)``.
    Raises RegistryError when MLflow cannot be reached or read."""
    reg.check_reachable(cfg)
    with reg.translating(cfg, "reading the champion's schema"):
        registry = reg.Registry(cfg)
        version = registry.alias_version(reg.CHAMPION)
        recorded = reg.recorded_schema(registry, version) if version else None
    return version, registry.name, recorded
