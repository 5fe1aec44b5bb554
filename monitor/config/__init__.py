"""Typed configuration: one YAML file plus ``DRIFTLOOP_*`` environment variables.

Precedence, lowest first: built-in defaults, the YAML file, environment variables.
An environment variable names a key by its path joined with double underscores::

    DRIFTLOOP_SERVER__PORT=8471        -> server.port
    DRIFTLOOP_ALERTS__ACCURACY_DROP=0.02

Values from the environment are parsed as YAML scalars/lists, so ``true``, ``5`` and
``[a, b]`` mean what they look like; text keys (token, host, URLs, names) take the value
verbatim. Everything is validated once, by :func:`load_config`, and every problem is reported
in one :class:`ConfigError`.

The sections live in modules of their own (``service``: logging, exporter, server, store; ``model``:
model, mlflow; ``checks``: drift, alerts; ``training``: training and its gate, export and shadow);
this module holds the whole (:class:`DriftloopConfig`) and the loader, and re-exports every section.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Mapping, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, Field, PrivateAttr, ValidationError, model_validator

from monitor.errors import ConfigError
from monitor.tasks import TASKS

from monitor.config.base import DEFAULT_CONFIG_FILE, ENV_PREFIX, _Section
from monitor.config import fleet as F
from monitor.config.checks import (RULE_METRIC_TASKS, RULE_METRICS, SEGMENT_RULE_METRICS, AlertsConfig, DriftConfig,
                                   MetricRule)
from monitor.config.descriptors import INPUT_URI_SOURCE, DescriptorsConfig
from monitor.config.model import TIME_SEGMENTS, FeatureSpec, MlflowConfig, ModelConfig
from monitor.config.service import MIN_TOKEN_LENGTH, ExporterConfig, LoggingConfig, ServerConfig, StoreConfig
from monitor.config.fleet import FleetConfig
from monitor.config.training import (DEPRECATED_TRAINING_KEYS, ExportConfig, GateConfig, ShadowConfig,
                                     TrainingConfig)

__all__ = ["AlertsConfig", "DEFAULT_CONFIG_FILE", "DEPRECATED_TRAINING_KEYS", "DescriptorsConfig", "DriftConfig",
           "DriftloopConfig", "ENV_PREFIX", "ExportConfig", "ExporterConfig", "FeatureSpec", "FleetConfig",
           "GateConfig", "LoggingConfig",
           "MIN_TOKEN_LENGTH", "MetricRule", "MlflowConfig", "ModelConfig", "RULE_METRICS", "RULE_METRIC_TASKS",
           "SEGMENT_RULE_METRICS", "ServerConfig", "ShadowConfig", "StoreConfig", "TIME_SEGMENTS", "TrainingConfig",
           "load_config"]


class DriftloopConfig(_Section):
    home: Path = Field(Path("driftloop-data"), description="folder for everything embedded: the default store "
                       "(driftloop.db), MLflow (mlflow.db, mlartifacts/), Evidently reports (reports/), "
                       "checkpoints, retrain jobs")
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    exporter: ExporterConfig = Field(default_factory=ExporterConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    mlflow: MlflowConfig = Field(default_factory=MlflowConfig)
    drift: DriftConfig = Field(default_factory=DriftConfig)
    alerts: AlertsConfig = Field(default_factory=AlertsConfig)
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    fleet: FleetConfig = Field(default_factory=FleetConfig)
    models: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="many models in one deployment: model name → its own sections (model, "
        "training, alerts, drift, and mlflow's experiment and registered_model), merged over the top-level ones; "
        "server, store, mlflow's tracking, exporter and fleet are shared. Without models (and models_dir) the file "
        "describes one model, as always (docs: Many models)")
    models_dir: Path | None = Field(None, description="a folder of one YAML file per model (its sections; the "
                                    "file's name is the model's name unless model.name says otherwise), added to "
                                    "models; relative to the config file. Reread on reload (SIGHUP)")
    # name → the model's whole configuration (load_config fills it for a fleet; empty for one model).
    _models: dict[str, "DriftloopConfig"] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _rules_fit_task(self) -> "DriftloopConfig":
        if not self.model.task_configured:
            return self  # the champion says which task; monitor.daemon checks the rules then
        wrong = [r.key for r in self.alerts.rules if self.model.task not in RULE_METRIC_TASKS.get(r.metric, TASKS)]
        if wrong:
            raise ValueError(f"alerts.rules {', '.join(wrong)} do not apply to a {self.model.task} model "
                             "(docs: Tasks, which metrics each task has)")
        return self

    @model_validator(mode="after")
    def _descriptor_source_exists(self) -> "DriftloopConfig":
        text = self.drift.descriptors.text
        if text is None or text == INPUT_URI_SOURCE or not self.model.features_configured:
            return self  # without features the champion's schema comes later; the check says so then
        if text not in self.model.categorical_features:
            raise ValueError(f"drift.descriptors.text: {text!r} is neither {INPUT_URI_SOURCE} nor a categorical "
                             "feature of model.features")
        return self

    # The models of the deployment.
    @property
    def is_fleet(self) -> bool:
        """Whether the file lists its models (``models:`` or ``models_dir:``), even a list of one."""
        return bool(self._models)

    def model_configs(self) -> dict[str, "DriftloopConfig"]:
        """Every monitored model's whole configuration, by name, in the order given; a single-model
        file is a fleet of one (itself)."""
        return dict(self._models) if self._models else {self.model.name: self}

    def for_model(self, name: str | None) -> "DriftloopConfig":
        """The configuration of model ``name``; None: the only model (ConfigError when the
        deployment has several, or no model of that name)."""
        configs = self.model_configs()
        if name is None:
            if len(configs) == 1:
                return next(iter(configs.values()))
            raise ConfigError(f"this configuration has {len(configs)} models ({', '.join(configs)}): choose one "
                              "with --model NAME")
        if name not in configs:
            raise ConfigError(f"no model {name!r} in this configuration; its models: {', '.join(configs)}")
        return configs[name]

    # Derived locations: one place decides where embedded defaults live.
    @property
    def store_url(self) -> str:
        return self.store.url or f"sqlite:///{(self.home / 'driftloop.db').resolve()}"

    @property
    def tracking_uri(self) -> str:
        return self.mlflow.tracking_uri or f"sqlite:///{(self.home / 'mlflow.db').resolve()}"

    @property
    def artifact_root(self) -> Path:
        return (self.home / "mlartifacts").resolve()

    @property
    def experiment_name(self) -> str:
        return self.mlflow.experiment or f"driftloop-{self.model.name}"

    @property
    def registered_model_name(self) -> str:
        return self.mlflow.registered_model or f"driftloop-{self.model.name}"

    @property
    def reports_dir(self) -> Path:
        return self.home / "reports"

    @property
    def evidently_workspace(self) -> Path | None:
        """Where ``drift.workspace`` puts the Evidently workspace; None when it is off."""
        return self.home / self.drift.workspace if self.drift.workspace else None

    @property
    def constraints_path(self) -> Path | None:
        """The model's constraints file (``drift.constraints``, relative to home; unset:
        ``constraints/<model>.json`` under home); None when it is off."""
        if self.drift.constraints == "":
            return None
        return self.home / (self.drift.constraints or f"constraints/{self.model.name}.json")

    @property
    def checkpoints_dir(self) -> Path:
        return self.home / "checkpoints"


def _takes_text(path: list[str], optional: bool = False) -> bool:
    """Whether the key at ``path`` holds text (str, Path or a Literal of strings); with ``optional``, or None."""
    model: Any = DriftloopConfig
    for part in path[:-1]:
        field = model.model_fields.get(part)
        if field is None or not (isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)):
            return False
        model = field.annotation
    field = model.model_fields.get(path[-1])
    if field is None:
        return False
    kinds = get_args(field.annotation) if get_origin(field.annotation) in (Union, UnionType) else (field.annotation,)
    rest = [k for k in kinds if k is not type(None)]
    text = all(k in (str, Path) or (get_origin(k) is Literal and all(isinstance(a, str) for a in get_args(k)))
               for k in rest)
    return bool(rest) and text and (not optional or len(rest) < len(kinds))


def _env_overrides(environ: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The ``DRIFTLOOP_*`` variables as a nested tree, and the problems found in their names.

    Ours rather than pydantic-settings (``env_prefix``, ``env_nested_delimiter="__"``), which was
    tried (2.16.3) and differs from the documented rules in ways each needing an override of its
    parsing: it drops a variable whose section is misspelt (``DRIFTLOOP_SERVR__PORT``) silently,
    where a typo must be an error; it keeps ``""`` as text, where an empty value unsets an optional
    key; it decodes lists as JSON (``[a, b]`` fails) and stops at the first undecodable value instead
    of reporting every problem together. It also reads ``os.environ`` only, and the tests inject it.
    """
    tree: dict[str, Any] = {}
    problems: list[str] = []
    for key, raw in environ.items():
        if not key.startswith(ENV_PREFIX) or key == ENV_PREFIX + "CONFIG":
            continue
        path = [p.lower() for p in key[len(ENV_PREFIX):].split("__")]
        if not all(path):
            problems.append(f"{key}: empty path segment (use DRIFTLOOP_SECTION__KEY)")
            continue
        if raw == "":
            value = None
        elif _takes_text(path):
            # Text keys (token, host, URLs, names, choices) take the variable verbatim: YAML would turn
            # a token '#x' into null (auth off), '::' into a mapping, 'off' into false and '0123' into 83.
            value = None if raw in ("null", "~") and _takes_text(path, optional=True) else raw
        else:
            try:
                value = yaml.safe_load(raw)
            except yaml.YAMLError:
                value = raw
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                problems.append(f"{key}: conflicts with another variable")
                break
        else:
            node[path[-1]] = value
    return tree, problems


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _format_errors(exc: ValidationError, source: str) -> list[str]:
    lines = []
    for err in exc.errors():
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".") or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        # A whole section as the input says nothing more than the message, and may hold a token.
        shown = err["type"] != "extra_forbidden" and not isinstance(err.get("input"), dict)
        if err["loc"] and err["loc"][-1] == "token":  # never echo a secret into logs
            shown = False
        lines.append(f"{loc}: {msg} (got {err.get('input')!r})" if shown else f"{loc}: {msg}")
    return lines


def _fleet_models(data: dict[str, Any], base_dir: Path, problems: list[str],
                  overrides: dict[str, Any]) -> dict[str, DriftloopConfig]:
    """Each model of ``models:`` / ``models_dir:`` validated into a whole configuration (problems
    appended, prefixed with the model's path). ``overrides`` (CLI flags) win over a model's own sections."""
    overrides = {k: v for k, v in overrides.items() if k not in ("models", "models_dir")}
    entries = F.model_entries(data, base_dir, problems)
    if not entries:
        problems.append("models: no model defined (models: is empty and models_dir: has no *.yaml file)")
    mlflow: dict[str, Any] = data["mlflow"] if isinstance(data.get("mlflow"), dict) else {}
    shared_names = sorted(k for k in F.PER_MODEL_MLFLOW_KEYS if mlflow.get(k))
    if shared_names and len(entries) > 1:
        problems.append(f"mlflow.{shared_names[0]}: one name for every model would mix their runs and versions; "
                        f"set it per model (models.<name>.mlflow.{shared_names[0]}) or leave it out "
                        "(driftloop-<model name>)")
    tables: dict[str, str] = {}
    models: dict[str, DriftloopConfig] = {}
    for name, entry in entries.items():
        found = F.entry_problems(name, entry)
        if found:
            problems += found
            continue
        table = re.sub(r"[^a-z0-9_]", "_", name.lower())
        if table in tables:
            problems.append(f"models.{name}: its tables would be those of model {tables[table]!r} (names differ only "
                            "in case or punctuation); rename one")
            continue
        tables[table] = name
        try:
            models[name] = DriftloopConfig.model_validate(_merge(F.expand(data, name, entry), overrides))
        except ValidationError as exc:
            # Errors in the shared sections are reported once, by the top-level validation.
            problems += [f"models.{name}.{line}" if not line.startswith("(top level)") else f"models.{name}: {line}"
                         for line in _format_errors(exc, name)
                         if line.split(":")[0].split(".")[0].split("[")[0] in (*F.PER_MODEL_SECTIONS, "(top level)")]
    problems += F.shared_mlflow_names(models, said=shared_names)
    return models


def load_config(
    path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> DriftloopConfig:
    """Build the configuration. ``path`` None means ``$DRIFTLOOP_CONFIG`` or ``./driftloop.yaml`` if present.

    ``overrides`` (a nested dict, e.g. from CLI flags) win over everything else.
    """
    environ = os.environ if environ is None else environ
    problems: list[str] = []
    data: dict[str, Any] = {}
    explicit = path is not None or ENV_PREFIX + "CONFIG" in environ
    file = Path(path if path is not None else environ.get(ENV_PREFIX + "CONFIG", DEFAULT_CONFIG_FILE))
    if file.exists():
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{file}: cannot read the config file: {exc}") from exc
        try:
            loaded = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            # One line, as every CLI error: PyYAML's own text spans several and names "<unicode string>".
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise ConfigError(f"{file}: not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from exc
        if not isinstance(loaded, dict):
            raise ConfigError(f"{file}: expected a mapping at the top level, got {type(loaded).__name__}")
        data = loaded
    elif explicit:
        raise ConfigError(f"config file not found: {file}")
    env_tree, env_problems = _env_overrides(environ)
    problems += env_problems
    data = _merge(data, env_tree)
    if overrides:
        data = _merge(data, dict(overrides))
    try:
        cfg = DriftloopConfig.model_validate(data)
    except ValidationError as exc:
        problems += _format_errors(exc, str(file))
        cfg = None
    if data.get("models") or data.get("models_dir"):
        models = _fleet_models(data, file.parent if file.exists() else Path.cwd(), problems, dict(overrides or {}))
        if cfg is not None:
            cfg._models = models
    if problems:
        where = f" ({file})" if file.exists() else ""
        raise ConfigError(f"invalid configuration{where}:\n  " + "\n  ".join(problems))
    assert cfg is not None
    return cfg
