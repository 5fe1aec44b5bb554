"""The MLflow boundary: reaching the store, its errors, the model registry and its aliases.

Every MLflow, HTTP, database or filesystem error raised at this boundary becomes a
:class:`RegistryError` (translated once, by :func:`translating`). Aliases on the registered model:

- ``champion``: the serving model; ``challenger``: the last retrained candidate, promoted or not;
- ``previous-champion``: where ``driftloop rollback`` goes.

The full succession of champions is a JSON list in the registered model's tag
``driftloop.champion_history`` (newest last), so rollbacks can go back more than one step.

This module is the trainer's one door to MLflow (``from trainer import registry as reg``): it also
re-exports logging a model (:mod:`trainer.model_log`: ``log_model``, ``log_baseline``,
``recorded_schema``) and loading one for serving (:mod:`trainer.champion_load`: ``load_version``,
``ChampionCache``; :func:`load_champion`, here, finds the champion and loads it there).
"""
from __future__ import annotations

import json
import logging
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import httpx

from monitor.config import DriftloopConfig
from monitor.errors import DriftloopError, RegistryError
from trainer.champion_load import ChampionCache, load_cached, load_version
from trainer.model_log import (BASELINE_DIR, COLUMNS_TAG, SCHEMA_TAG, TASK_TAG, input_signature, log_baseline,
                               log_model, recorded_schema)
from trainer.outcomes import Champion

__all__ = [
    "BASELINE_DIR", "CHALLENGER", "CHAMPION", "CHAMPION_RUN_TAG", "COLUMNS_TAG", "ChampionCache", "HISTORY_KEEP",
    "HISTORY_TAG", "PREVIOUS", "Registry", "SCHEMA_TAG", "TASK_TAG", "check_reachable", "input_signature",
    "load_champion", "load_version", "log_baseline", "log_model", "recorded_schema", "session", "translating",
]

log = logging.getLogger(__name__)

CHAMPION, CHALLENGER, PREVIOUS = "champion", "challenger", "previous-champion"
HISTORY_TAG = "driftloop.champion_history"
HISTORY_KEEP = 100
CHAMPION_RUN_TAG = "driftloop.champion"  # on runs: "true" only on the champion version's run (the alias decides)


@contextmanager
def translating(cfg: DriftloopConfig, action: str) -> Iterator[None]:
    """Turn whatever MLflow and its transports raise into one RegistryError naming the store."""
    try:
        yield
    except DriftloopError:
        raise
    except Exception as exc:
        from mlflow.exceptions import MlflowException
        if isinstance(exc, (MlflowException, OSError, httpx.HTTPError)) or type(exc).__module__.startswith(
                ("requests", "urllib3", "sqlalchemy", "mlflow")):
            raise RegistryError(f"MLflow {action} failed ({cfg.tracking_uri}): {_short(exc)}") from exc
        raise


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def check_reachable(cfg: DriftloopConfig, known_champion: str | None = None) -> None:
    """Fail fast with a RegistryError when the tracking store cannot be used (checked before any
    training, so an outage costs a second, not a wasted retrain). A SQLite store must take writes
    (MLflow's own error for a read-only file is an "autoflush" riddle); with ``known_champion``
    (a version served from it before) it must also exist, since MLflow would silently create an
    empty registry in its place."""
    uri = cfg.tracking_uri
    if uri.startswith("sqlite:///"):
        from monitor.writable import sqlite_write_problem

        db = Path(uri[len("sqlite:///"):])
        if db.exists():
            problem = sqlite_write_problem(db, cfg.mlflow.timeout_seconds)
            if problem is not None:
                raise RegistryError(f"MLflow store {uri} cannot be written: {problem}", kind=problem.kind)
        elif known_champion is not None:
            raise RegistryError(f"MLflow store {db} is missing, but champion version {known_champion} was "
                                "served from it: restore the file (driftloop will not create an empty registry "
                                "in its place)")
    if uri.startswith(("http://", "https://")):
        try:
            r = httpx.get(uri.rstrip("/") + "/health", timeout=cfg.mlflow.timeout_seconds)
        except httpx.HTTPError as exc:
            raise RegistryError(f"MLflow tracking server {uri} is unreachable: {_short(exc)}") from exc
        if r.status_code != 200:
            raise RegistryError(f"MLflow tracking server {uri} is unhealthy: HTTP {r.status_code} on /health")
    elif uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):])
        try:
            db.parent.mkdir(parents=True, exist_ok=True)
            cfg.artifact_root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RegistryError(f"MLflow store {uri}: cannot create {db.parent}: {exc}") from exc
    elif uri.startswith("file:") or ("://" not in uri and not uri.startswith("databricks")):
        raise RegistryError(f"mlflow.tracking_uri {uri!r}: file stores are not supported by MLflow 3; "
                            "use sqlite:///path/mlflow.db or http://host:5000")


@contextmanager
def session(cfg: DriftloopConfig) -> Iterator[None]:
    """Point MLflow's fluent API (runs, metrics, log_model) at our store for the duration, restoring
    the previous setting afterwards, with HTTP timeouts bounded so an outage mid-run fails in
    seconds rather than minutes of retries. The registry is only used through explicit clients."""
    import mlflow
    previous = mlflow.get_tracking_uri() if mlflow.is_tracking_uri_set() else None
    env = {"MLFLOW_HTTP_REQUEST_TIMEOUT": str(max(1, int(cfg.mlflow.timeout_seconds))),
           "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
    added = [k for k in env if k not in os.environ]
    for k in added:
        os.environ[k] = env[k]
    mlflow.set_tracking_uri(cfg.tracking_uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(previous)  # type: ignore[arg-type]  # None unsets it; mlflow's annotation omits None
        for k in added:
            os.environ.pop(k, None)


class Registry:
    """Our registered model and its experiment. Construct inside :func:`session` and :func:`translating`."""

    def __init__(self, cfg: DriftloopConfig):
        from mlflow import MlflowClient
        self.cfg = cfg
        self.name = cfg.registered_model_name
        self.client = MlflowClient(tracking_uri=cfg.tracking_uri, registry_uri=cfg.tracking_uri)

    def experiment_id(self) -> str:
        from trainer.story import CLASSIC_ML, EXPERIMENT_KIND_TAG
        exp = self.client.get_experiment_by_name(self.cfg.experiment_name)
        if exp is not None:
            if EXPERIMENT_KIND_TAG not in exp.tags:  # made by an older driftloop: open it on its runs too
                self.client.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, CLASSIC_ML)
            return exp.experiment_id
        local = self.cfg.tracking_uri.startswith("sqlite:")
        # With a tracking server, the server decides where artifacts go (its --default-artifact-root).
        location = (self.cfg.artifact_root / self.cfg.experiment_name).as_uri() if local else None
        return self.client.create_experiment(self.cfg.experiment_name, artifact_location=location,
                                             tags={"driftloop.model": self.cfg.model.name,
                                                   EXPERIMENT_KIND_TAG: CLASSIC_ML})

    def alias_version(self, alias: str) -> str | None:
        from mlflow.exceptions import MlflowException
        try:
            return str(self.client.get_model_version_by_alias(self.name, alias).version)
        except MlflowException as exc:
            if exc.error_code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE", "NOT_FOUND"):
                return None
            raise

    def register(self, model_uri: str, run_id: str, model_id: str | None) -> str:
        """A new version of our registered model (created on first use) for a logged model; the
        model's description (what it predicts, from which features) follows the configuration."""
        from mlflow.exceptions import MlflowException

        from trainer.story import model_description
        description = model_description(self.cfg)
        try:
            self.client.create_registered_model(self.name, tags={"driftloop.model": self.cfg.model.name},
                                                description=description)
        except MlflowException as exc:
            if exc.error_code not in ("RESOURCE_ALREADY_EXISTS", "ALREADY_EXISTS"):
                raise
            if self.client.get_registered_model(self.name).description != description:
                self.client.update_registered_model(self.name, description=description)
        mv = self.client.create_model_version(self.name, source=model_uri, run_id=run_id, model_id=model_id)
        return str(mv.version)

    def run_id_of(self, version: str) -> str:
        return str(self.client.get_model_version(self.name, version).run_id)

    def history(self) -> list[str]:
        from mlflow.exceptions import MlflowException
        try:
            tags = self.client.get_registered_model(self.name).tags
        except MlflowException as exc:
            if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
                return []
            raise
        return [str(v) for v in json.loads(tags.get(HISTORY_TAG, "[]"))]

    def _set_history(self, versions: list[str]) -> None:
        self.client.set_registered_model_tag(self.name, HISTORY_TAG, json.dumps(versions[-HISTORY_KEEP:]))

    def make_champion(self, version: str) -> str | None:
        """Move ``champion`` to ``version``; the old one becomes ``previous-champion``. Returns it."""
        old = self.alias_version(CHAMPION)
        if old is not None and old != version:
            self.client.set_registered_model_alias(self.name, PREVIOUS, old)
        self.client.set_registered_model_alias(self.name, CHAMPION, version)
        history = [v for v in self.history() if v != version] + [version]
        if old is not None and old not in history:
            history.insert(len(history) - 1, old)
        self._set_history(history)
        self._mark_champion(version, old)
        return old

    def _mark_champion(self, new: str, old: str | None) -> None:
        """Keep the runs' ``driftloop.champion`` tag true only on the champion's run: the alias is
        the truth, and a stale ``true`` on an old version's run misleads whoever browses the runs."""
        if old is not None and old != new:
            old_run, new_run = self.run_id_of(old), self.run_id_of(new)
            if old_run != new_run:
                self.client.set_tag(old_run, CHAMPION_RUN_TAG, "false")
        self.client.set_tag(self.run_id_of(new), CHAMPION_RUN_TAG, "true")

    def roll_back(self) -> tuple[str, str]:
        current = self.alias_version(CHAMPION)
        if current is None:
            raise RegistryError(f"registered model {self.name!r} has no champion to roll back")
        history = self.history()
        if current in history:
            history = history[: len(history) - history[::-1].index(current)]  # drop anything after it
            earlier = history[:-1]
        else:  # aliases moved by hand: fall back on the alias
            previous = self.alias_version(PREVIOUS)
            earlier = [previous] if previous else []
        if not earlier:
            raise RegistryError(f"registered model {self.name!r}: champion v{current} has no previous "
                                "champion to roll back to")
        target = earlier[-1]
        self.client.set_registered_model_alias(self.name, CHAMPION, target)
        if len(earlier) > 1:
            self.client.set_registered_model_alias(self.name, PREVIOUS, earlier[-2])
        else:
            self.client.delete_registered_model_alias(self.name, PREVIOUS)
        self._set_history(earlier)
        self.client.set_model_version_tag(self.name, current, "driftloop.rolled_back", "true")
        self.client.set_model_version_tag(self.name, target, "driftloop.restored_from", current)
        self._mark_champion(target, current)
        return current, target


def load_champion(cfg: DriftloopConfig, *, cache: ChampionCache | None = None) -> Champion:
    """The model behind alias ``champion`` with its baseline; RegistryError if there is none."""
    check_reachable(cfg)
    with translating(cfg, "loading the champion"):
        registry = Registry(cfg)
        version = registry.alias_version(CHAMPION)
        if version is None:
            raise RegistryError(f"registered model {registry.name!r} has no {CHAMPION!r} version; "
                                "train one first with `driftloop train --data FILE`")
        return load_cached(cfg, registry, version, cache)
