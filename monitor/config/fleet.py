"""Many models in one deployment: the ``fleet`` section and the expansion of ``models:`` / ``models_dir:``.

A file with ``models:`` (name → the per-model sections: ``model``, ``training``, ``alerts``, ``drift``
and ``mlflow``'s names) or ``models_dir:`` (one YAML file per model) describes a fleet; the shared
sections (``home``, ``logging``, ``exporter``, ``server``, ``store``, ``mlflow``'s tracking, ``fleet``)
stay at the top. The top-level per-model sections, when given, are every model's defaults: a model's
own section is merged over them key by key. A file without either is a fleet of one, unchanged.

Each model is validated into a whole :class:`~monitor.config.DriftloopConfig` of its own (the shared
sections plus its own), which is what every part of driftloop takes; problems are reported with the
model's path (``models.churn.alerts.accuracy_drop: …``).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from monitor.config.base import _Section

if TYPE_CHECKING:  # the whole configuration is built from these sections; only its names are read here
    from monitor.config import DriftloopConfig

# The sections a model may set for itself; every other section is shared by the deployment.
PER_MODEL_SECTIONS = ("model", "training", "alerts", "drift", "mlflow")
# mlflow's tracking server is shared; a model may only name its own experiment and registered model.
PER_MODEL_MLFLOW_KEYS = frozenset({"experiment", "registered_model"})
# A model's name is a URL path segment (/v1/models/{name}/…), a metric label and part of table names.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,47}$")


class FleetConfig(_Section):
    check_workers: int = Field(2, ge=1, le=64, description="threads that run the models' checks, shared by every "
                               "model (each model's checks run one at a time, at its own drift.interval_seconds; "
                               "a check that waits for a free thread is counted in "
                               "driftloop_fleet_check_delay_seconds)")
    max_concurrent_retrains: int | None = Field(
        None, ge=1, le=64, description="retrains running at once across the deployment's models; the rest wait in "
        "one queue ordered by severity (a person's or Alertmanager's request, then a performance breach, then "
        "drift) and then by waiting time. Default: one per GPU, 1 without a GPU")


def model_entries(data: dict[str, Any], base_dir: Path, problems: list[str]) -> dict[str, dict[str, Any]]:
    """The raw per-model sections of ``models:`` and the files of ``models_dir:`` (name → sections),
    in the order given (``models:`` first, then the files by name). Problems are appended."""
    entries: dict[str, dict[str, Any]] = {}
    inline = data.get("models") or {}
    if not isinstance(inline, dict):
        problems.append(f"models: expected a mapping of model name to its sections, got {type(inline).__name__}")
        inline = {}
    for name, entry in inline.items():
        if entry is None:
            entry = {}
        if not isinstance(entry, dict):
            problems.append(f"models.{name}: expected a mapping of sections ({', '.join(PER_MODEL_SECTIONS)}), "
                            f"got {type(entry).__name__}")
            continue
        entries[str(name)] = entry
    folder = data.get("models_dir")
    if folder:
        import yaml
        path = Path(folder)
        path = path if path.is_absolute() else base_dir / path
        if not path.is_dir():
            problems.append(f"models_dir: not a folder: {path}")
        else:
            for file in sorted([*path.glob("*.yaml"), *path.glob("*.yml")]):
                try:
                    loaded = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
                except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
                    problems.append(f"models_dir: {file.name}: cannot read it as YAML: {str(exc).splitlines()[0]}")
                    continue
                if not isinstance(loaded, dict):
                    problems.append(f"models_dir: {file.name}: expected a mapping of sections, "
                                    f"got {type(loaded).__name__}")
                    continue
                declared = (loaded.get("model") or {}).get("name") if isinstance(loaded.get("model"), dict) else None
                name = str(declared or file.stem)
                if name in entries:
                    problems.append(f"models_dir: {file.name}: model {name!r} is already defined "
                                    f"{'in models:' if name in inline else 'by another file'}")
                    continue
                entries[name] = loaded
    return entries


def entry_problems(name: str, entry: dict[str, Any]) -> list[str]:
    """What is wrong with one model's raw sections before validation (unknown sections, shared keys)."""
    problems = []
    if not NAME_PATTERN.match(name):
        problems.append(f"models.{name}: a model's name is 1-48 letters, digits, _, . or -, starting with a letter "
                        "or digit (it is a URL path segment, a metric label and part of table names)")
    for section in entry:
        if section not in PER_MODEL_SECTIONS:
            problems.append(f"models.{name}.{section}: not a per-model section (a model sets "
                            f"{', '.join(PER_MODEL_SECTIONS)}; {section} is shared: set it at the top level)")
    mlflow = entry.get("mlflow")
    if isinstance(mlflow, dict):
        shared = sorted(set(mlflow) - PER_MODEL_MLFLOW_KEYS)
        if shared:
            problems.append(f"models.{name}.mlflow: {', '.join(shared)} shared by the deployment (a model sets only "
                            "experiment and registered_model)")
    model = entry.get("model")
    if isinstance(model, dict) and model.get("name") not in (None, name):
        problems.append(f"models.{name}.model.name: {model.get('name')!r} differs from the model's key {name!r} "
                        "(leave it out: the key is the name)")
    return problems


def expand(shared: dict[str, Any], name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """One model's whole configuration data: the shared sections, the top-level per-model sections as
    defaults, the model's own sections merged over them, and its name."""
    from monitor.config import _merge
    data = {k: v for k, v in shared.items() if k not in ("models", "models_dir")}
    data = _merge(data, {k: v for k, v in entry.items() if isinstance(v, dict)})
    model = dict(data.get("model") or {})
    model["name"] = name
    data["model"] = model
    return data


def shared_mlflow_names(models: dict[str, DriftloopConfig], said: list[str]) -> list[str]:
    """Two models of one deployment under one registered model would share one ``champion`` alias (a
    promotion of one replaces the other's model), and under one experiment mix their runs: each name,
    set per model or the ``driftloop-<model name>`` default, belongs to one model. ``said``: the keys
    already refused as set once for every model."""
    problems = []
    for key, name_of, harm in (("registered_model", lambda c: c.registered_model_name,
                                "their versions, and one `champion` alias for both"),
                               ("experiment", lambda c: c.experiment_name, "their runs")):
        if key in said:
            continue
        owner: dict[str, str] = {}
        # A default name (driftloop-<model name>) is its model's own: the model that set it again is named.
        for model, cfg in sorted(models.items(), key=lambda item: getattr(item[1].mlflow, key) is not None):
            name = name_of(cfg)
            if name in owner:
                problems.append(f"models.{model}.mlflow.{key}: {name!r} is also the name of model {owner[name]!r} "
                                f"(set, or its default driftloop-<model name>); one name for two models mixes {harm}: "
                                "give each model its own")
            else:
                owner[name] = model
    return problems
