"""The feature schema a command runs with: the configured one, checked against the champion's, or,
when none is configured, the champion's own (recorded by ``driftloop train``)."""
from __future__ import annotations

import logging

from monitor.config import DriftloopConfig, FeatureSpec
from monitor.errors import ConfigError, RegistryError

log = logging.getLogger(__name__)


def with_champion_schema(cfg: DriftloopConfig, *, required: bool = False) -> DriftloopConfig:
    """``cfg`` whose ``model.features`` agree with the champion's recorded schema.

    ConfigError (one line) when configured features differ from the champion's. Without a champion,
    or with MLflow unreachable, the configuration is used as it is (``required``: re-raise instead)."""
    from monitor.dataschema import schema_mismatch, schema_of, with_features
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
    if not cfg.model.features_configured:
        # Nothing configured: the champion's own schema, and the column names it was trained with
        # where those are not configured either (`driftloop train --target churned`, then `serve`).
        named = {k: v for k, v in columns.items() if k not in cfg.model.model_fields_set}
        model = with_features(cfg.model.model_copy(update=named),
                              [FeatureSpec(name=n, type=t) for n, t in features.items()])  # type: ignore[arg-type]
        return cfg.model_copy(update={"model": model})
    problem = schema_mismatch(schema_of(cfg.model), features)
    if problem:
        raise ConfigError(f"model.features do not match champion v{version} of {registered_name!r}: {problem}; "
                          "make model.features match the model (or train a new one with `driftloop train`)")
    return cfg
