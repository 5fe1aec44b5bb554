"""The feature schema a command runs with: the configured one, checked against the champion's, or,
when none is configured, the champion's own (recorded by ``driftloop train``)."""
from __future__ import annotations

import logging

from monitor.config import DriftloopConfig
from monitor.errors import ConfigError, RegistryError

log = logging.getLogger(__name__)


def with_champion_schema(cfg: DriftloopConfig, *, required: bool = False) -> DriftloopConfig:
    """``cfg`` whose ``model.features`` agree with the champion's recorded schema.

    ConfigError (one line) when configured features differ from the champion's. Without a champion,
    or with MLflow unreachable, the configuration is used as it is (``required``: re-raise instead)."""
    from monitor.dataschema import feature_spec, schema_mismatch, schema_of, with_features
    from trainer import champion_schema

    try:
        version, registered_name, recorded = champion_schema(cfg)
    except RegistryError as exc:
        if required:
            raise
        log.warning("using the configured features unchecked: %s", exc)
        return cfg
    if recorded is None:
        return cfg
    features, columns = recorded
    cfg = _with_recorded_task(cfg, columns, version, registered_name)
    if not cfg.model.features_configured:
        # Nothing configured: the champion's own schema, and the column names it was trained with
        # where those are not configured either (`driftloop train --target churned`, then `serve`).
        named = {k: v for k, v in columns.items() if k not in cfg.model.model_fields_set
                 and k not in ("task", "classes")}
        model = with_features(cfg.model.model_copy(update=named),
                              [feature_spec(n, t) for n, t in features.items()])
        return cfg.model_copy(update={"model": model})
    problem = schema_mismatch(schema_of(cfg.model), features)
    if problem:
        raise ConfigError(f"model.features do not match champion v{version} of {registered_name!r}: {problem}; "
                          "make model.features match the model (or train a new one with `driftloop train`)")
    return cfg


def _with_recorded_task(cfg: DriftloopConfig, columns: dict, version: str, registered_name: str) -> DriftloopConfig:
    """``cfg`` with the champion's task and classes where they are not configured; ConfigError when
    the configured task or classes contradict the champion's."""
    task, classes = columns.get("task", "binary"), columns.get("classes")
    model = cfg.model
    if model.task_configured and model.task != task:
        raise ConfigError(f"model.task is {model.task} but champion v{version} of {registered_name!r} is a {task} "
                          "model; unset model.task (the champion says) or train a new model")
    if "classes" in model.model_fields_set and classes is not None and model.classes != classes:
        raise ConfigError(f"model.classes {model.classes} differ from champion v{version}'s {classes}; unset "
                          "model.classes (the champion says) or train a new model")
    update = {"task": task, "classes": classes if "classes" not in model.model_fields_set else model.classes}
    data = {**model.model_dump(exclude_unset=True), **update}
    if "features" not in model.model_fields_set:
        data.pop("features", None)
    from monitor.config import ModelConfig
    return cfg.model_copy(update={"model": ModelConfig.model_validate(data)})
