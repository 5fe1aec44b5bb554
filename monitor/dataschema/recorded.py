"""The schema a model version records (tag ``driftloop.schema``): a model's features in that form,
back again, and how configured features differ from a version's."""
from __future__ import annotations

from typing import Any

from monitor.config import FeatureSpec, ModelConfig


def with_features(model: ModelConfig, features: list[FeatureSpec]) -> ModelConfig:
    """``model`` with ``features`` set, validated as if they had been configured."""
    data = model.model_dump(exclude={"features"})
    return ModelConfig.model_validate({**data, "features": [f.model_dump() for f in features]})


def schema_of(model: ModelConfig) -> dict[str, Any]:
    """``{feature: type}``, the form a model version records (tag ``driftloop.schema``); an
    embedding's entry is ``{"type": "embedding", "dim": N}`` (a vector's length is part of its type)."""
    return {f.name: f.type if f.dim is None else {"type": f.type, "dim": f.dim} for f in model.features}


def feature_spec(name: str, recorded: Any) -> FeatureSpec:
    """A feature from its recorded entry (:func:`schema_of`): a type, or ``{"type", "dim"}``."""
    return FeatureSpec.model_validate({"name": name,
                                       **(recorded if isinstance(recorded, dict) else {"type": recorded})})


def _type_text(entry: Any) -> str:
    return f"{entry['type']}[{entry.get('dim')}]" if isinstance(entry, dict) else str(entry)


def schema_mismatch(configured: dict[str, Any], recorded: dict[str, Any]) -> str | None:
    """One line saying how the configured features differ from a model's recorded ones, or None."""
    parts = []
    extra = [n for n in configured if n not in recorded]
    lacking = [n for n in recorded if n not in configured]
    changed = [f"{n} ({_type_text(recorded[n])} -> {_type_text(configured[n])})" for n in configured if n in recorded
               and configured[n] != recorded[n]]
    if extra:
        parts.append(f"configured but not in the model: {', '.join(extra)}")
    if lacking:
        parts.append(f"in the model but not configured: {', '.join(lacking)}")
    if changed:
        parts.append(f"type changed: {', '.join(changed)}")
    return "; ".join(parts) or None
