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
def bounded_http(cfg: DriftloopConfig) -> Iterator[None]:
    """MLflow's HTTP timeouts bounded for the duration (``mlflow.timeout_seconds``, 2 retries), so an
    outage fails in seconds rather than minutes of retries. Enough for an explicit client (the
    registry); :func:`session` adds the fluent API's tracking URI."""
    env = {"MLFLOW_HTTP_REQUEST_TIMEOUT": str(max(1, int(cfg.mlflow.timeout_seconds))),
           "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
    added = [k for k in env if k not in os.environ]
    for k in added:
        os.environ[k] = env[k]
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


@contextmanager
def session(cfg: DriftloopConfig) -> Iterator[None]:
    """Point MLflow's fluent API (runs, metrics, log_model) at our store for the duration, restoring
    the previous setting afterwards, with HTTP timeouts bounded (:func:`bounded_http`). The tracking
    URI is process-wide: code that may run beside a training in the same process (a lookup in a
    thread) uses an explicit client under :func:`bounded_http` instead. The registry is only used
    through explicit clients."""
    import mlflow
    previous = mlflow.get_tracking_uri() if mlflow.is_tracking_uri_set() else None
    with bounded_http(cfg):
        mlflow.set_tracking_uri(cfg.tracking_uri)
        try:
            yield
        finally:
            mlflow.set_tracking_uri(previous)  # type: ignore[arg-type]  # None unsets it; mlflow omits None


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
        """Move ``champion`` to ``version``; the old one becomes ``previous-champion``. Returns it.

        The history is rebuilt against the alias, not its own last entry: the version that *is*
        champion now (perhaps moved there by hand) is the one recorded before ``version``
        (:func:`_promoted_history`), and versions deleted since are dropped."""
        old = self.alias_version(CHAMPION)
        if old is not None and old != version:
            self.client.set_registered_model_alias(self.name, PREVIOUS, old)
        self.client.set_registered_model_alias(self.name, CHAMPION, version)
        history = _promoted_history(self.history(), old, version)
        existing = self._existing_versions()
        if existing is not None:
            history = [v for v in history if v in existing or v == version]
        self._set_history(history)
        self._mark_champion(version, old)
        return old

    def _existing_versions(self) -> set[str] | None:
        """Every version of our registered model (one search), or None when it cannot be asked."""
        if "'" in self.name:  # not expressible in a search filter: keep the history as it is
            return None
        return {str(mv.version) for mv in self.client.search_model_versions(f"name = '{self.name}'")}

    def _exists(self, version: str) -> bool:
        from mlflow.exceptions import MlflowException
        try:
            self.client.get_model_version(self.name, version)
        except MlflowException as exc:
            if exc.error_code in ("RESOURCE_DOES_NOT_EXIST", "NOT_FOUND", "INVALID_PARAMETER_VALUE"):
                return False
            raise
        return True

    def _mark_champion(self, new: str, old: str | None) -> None:
        """Keep the runs' ``driftloop.champion`` tag true only on the champion's run: the alias is
        the truth, and a stale ``true`` on an old version's run misleads whoever browses the runs."""
        if old is not None and old != new:
            old_run, new_run = self.run_id_of(old), self.run_id_of(new)
            if old_run != new_run:
                self.client.set_tag(old_run, CHAMPION_RUN_TAG, "false")
        self.client.set_tag(self.run_id_of(new), CHAMPION_RUN_TAG, "true")

    def roll_back(self) -> tuple[str, str]:
        """Move ``champion`` to the champion before it: ``(from_version, to_version)``.

        The target is the last existing version of :func:`_earlier_champions` (deleted versions are
        skipped); ``previous-champion`` then points at the one before it, and the history ends at
        the target, so the next rollback goes one further back. A RegistryError saying what is
        missing and how to fix it when no earlier champion exists."""
        current = self.alias_version(CHAMPION)
        if current is None:
            raise RegistryError(f"registered model {self.name!r} has no {CHAMPION!r} alias to roll back: set it "
                                "by hand (MLflow UI, or MlflowClient.set_registered_model_alias) to the version "
                                "to serve")
        history = self.history()
        previous = self.alias_version(PREVIOUS)
        chain = _earlier_champions(history, current, previous)
        deleted: list[str] = []
        while chain and not self._exists(chain[-1]):
            deleted.append(chain.pop())
        if not chain:
            raise RegistryError(self._nothing_to_roll_back(current, history, previous, deleted))
        target, rest = chain[-1], chain[:-1]
        while rest and not self._exists(rest[-1]):
            deleted.append(rest.pop())
        if deleted:
            log.warning("rollback of %s: skipped deleted version(s) %s of the champion history", self.name,
                        ", ".join(f"v{v}" for v in deleted))
        self.client.set_registered_model_alias(self.name, CHAMPION, target)
        if rest:
            self.client.set_registered_model_alias(self.name, PREVIOUS, rest[-1])
        elif previous is not None:
            self.client.delete_registered_model_alias(self.name, PREVIOUS)
        self._set_history(rest + [target])
        self.client.set_model_version_tag(self.name, current, "driftloop.rolled_back", "true")
        self.client.set_model_version_tag(self.name, target, "driftloop.restored_from", current)
        self._mark_champion(target, current)
        return current, target

    def _nothing_to_roll_back(self, current: str, history: list[str], previous: str | None,
                              deleted: list[str]) -> str:
        listed = ", ".join(f"v{v}" for v in history) or "nothing"
        why = [f"the champion history (tag {HISTORY_TAG}) lists {listed}"]
        if deleted:
            why.append(f"{', '.join(f'v{v}' for v in sorted(set(deleted), key=_order))} no longer exist(s) "
                       "(deleted)")
        if previous is None:
            why.append(f"alias {PREVIOUS!r} is not set")
        elif previous == current:
            why.append(f"alias {PREVIOUS!r} points at the champion itself")
        elif previous not in deleted:
            why.append(f"alias {PREVIOUS!r} (v{previous}) was set before {CHAMPION!r} was moved by hand to "
                       f"v{current}, so it is not taken as the champion before v{current}")
        return (f"registered model {self.name!r}: champion v{current} has no previous champion to roll back to "
                f"({'; '.join(why)}). Set alias {PREVIOUS!r} by hand (MLflow UI, or "
                "MlflowClient.set_registered_model_alias) to the version to go back to and run `driftloop "
                f"rollback` again, or move alias {CHAMPION!r} to that version yourself")


def _order(version: str) -> tuple[int, str]:
    return (int(version), "") if version.isdigit() else (0, version)


def _last(versions: list[str], version: str) -> int:
    return len(versions) - 1 - versions[::-1].index(version)


def _promoted_history(history: list[str], old: str | None, new: str) -> list[str]:
    """The champion history once ``new`` replaces ``old`` (the version the ``champion`` alias
    pointed at, whoever put it there). An ``old`` already in the history was moved back to by hand:
    like a rollback, that drops the champions after it. An ``old`` not in it was made champion by
    hand after the history's last entry, so it is recorded there."""
    if old is not None:
        history = history[: _last(history, old) + 1] if old in history else history + [old]
    return [v for v in history if v != new] + [new]


def _earlier_champions(history: list[str], current: str, previous: str | None) -> list[str]:
    """The champions before ``current``, oldest first; a rollback goes to the last that still exists.

    From the history: the entries before ``current``, or all of them when ``current`` is not in it
    (``champion`` was moved by hand to a version driftloop never promoted: the history's last entry
    was champion before it). The ``previous-champion`` alias (``previous``) is preferred when it is
    consistent: it is the target, entries after it are dropped (champions displaced by a hand move),
    and it is appended when the history lacks it. It is consistent unless it is stale, that is, the
    champion was moved by hand since driftloop last set the aliases (``current`` is not the
    history's last entry) and ``previous`` is still what driftloop left (the entry before the last)."""
    earlier = history[: _last(history, current)] if current in history else list(history)
    if previous is not None and previous != current:
        stale = bool(history) and current != history[-1] and previous == (history[-2] if len(history) > 1 else None)
        if not stale:
            earlier = earlier[: _last(earlier, previous) + 1] if previous in earlier else earlier + [previous]
    return [v for v in earlier if v != current]


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
