"""The MLflow boundary: runs, the model registry, aliases, the baseline artifacts, champion loading.

Every MLflow, HTTP, database or filesystem error raised in here becomes a :class:`RegistryError`
(translated once, by :func:`translating`). Aliases on the registered model:

- ``champion``: the serving model; ``challenger``: the last retrained candidate, promoted or not;
- ``previous-champion``: where ``driftloop rollback`` goes.

The full succession of champions is a JSON list in the registered model's tag
``driftloop.champion_history`` (newest last), so rollbacks can go back more than one step.
"""
from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from collections import OrderedDict
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import httpx
import pandas as pd

from monitor.config import DriftloopConfig
from monitor.errors import DriftloopError, RegistryError
from trainer.outcomes import Baseline, Champion

log = logging.getLogger(__name__)

CHAMPION, CHALLENGER, PREVIOUS = "champion", "challenger", "previous-champion"
HISTORY_TAG = "driftloop.champion_history"
HISTORY_KEEP = 100
BASELINE_DIR = "baseline"
SCHEMA_TAG = "driftloop.schema"  # {feature: "numeric" | "categorical" | {"type": "embedding", "dim": N}}, as JSON
COLUMNS_TAG = "driftloop.columns"  # {"target", "id", "score", "prediction": column name, "task", "classes"}, as JSON
CHAMPION_RUN_TAG = "driftloop.champion"  # on runs: "true" only on the champion version's run (the alias decides)
TASK_TAG = "driftloop.task"  # binary | multiclass | regression, for people browsing the registry


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
                raise RegistryError(f"MLflow store {uri} cannot be written: {problem}")
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


def log_baseline(baseline: Baseline) -> None:
    """Attach ``baseline`` to the active run as ``baseline/reference.parquet`` + ``baseline/metrics.json``."""
    import mlflow
    with tempfile.TemporaryDirectory() as tmp:
        baseline.reference.to_parquet(Path(tmp) / "reference.parquet", index=False)
        (Path(tmp) / "metrics.json").write_text(json.dumps(baseline.metrics, indent=2))
        mlflow.log_artifacts(tmp, BASELINE_DIR)


def log_model(model: Any, example: pd.DataFrame, registry: Registry) -> str:
    """Log ``model`` as a pyfunc with signature and input example into the active run and register a
    new version of it. Returns the version."""
    import mlflow
    import torch
    from trainer.pyfunc import TabularPyfunc, pickled_by_value

    model = model.cpu().eval()
    example = example.reset_index(drop=True)
    m = registry.cfg.model
    task = getattr(model, "task", "binary")
    spec = getattr(model, "spec", None)  # a training.entrypoint model (trainer/entrypoint_model.py)
    embedding = getattr(model, "embedding_feature", None)
    if spec:
        from monitor.embeddings import INPUT_URI
        from trainer.entrypoint import code_paths
        signature = input_signature([INPUT_URI, m.id], [], task=task, classes=getattr(model, "classes", None),
                                    prediction=m.prediction, embedding=embedding, score=m.score)
        # dataschema.schema_of's form
        schema = {f.name: f.type if f.dim is None else {"type": f.type, "dim": f.dim} for f in m.features}
        extra: dict[str, Any] = {"code_paths": code_paths(spec)}
    else:
        vectors = dict(getattr(model, "embeddings", None) or {})  # the MLP's embedding features: {name: dim}
        signature = input_signature([*model.numeric, *vectors], model.categorical, task=task,
                                    classes=getattr(model, "classes", None), prediction=m.prediction)
        schema = {**{n: "numeric" for n in model.numeric}, **{n: "categorical" for n in model.categorical},
                  **{n: {"type": "embedding", "dim": int(d)} for n, d in vectors.items()}}
        extra = {}
    requirements = [f"torch=={torch.__version__.split('+')[0]}", f"pandas=={pd.__version__}",
                    f"mlflow=={mlflow.__version__}", "cloudpickle"]
    with pickled_by_value(model), _quiet("mlflow.pyfunc", "mlflow.models.signature"):
        info = mlflow.pyfunc.log_model(name="model", python_model=TabularPyfunc(model, m.prediction, m.score),
                                       signature=signature, input_example=example, pip_requirements=requirements,
                                       metadata={SCHEMA_TAG: schema, **({"entrypoint": spec} if spec else {})},
                                       **extra)
    run = mlflow.active_run()
    assert run is not None  # log_model logged into the caller's run
    version = registry.register(info.model_uri, run.info.run_id, info.model_id)
    registry.client.set_model_version_tag(registry.name, version, SCHEMA_TAG, json.dumps(schema))
    registry.client.set_model_version_tag(registry.name, version, TASK_TAG, task)
    columns: dict[str, Any] = {"target": m.target, "id": m.id, "score": m.score, "prediction": m.prediction,
                               "task": m.task, "classes": m.classes}
    registry.client.set_model_version_tag(registry.name, version, COLUMNS_TAG, json.dumps(columns))
    return version


def input_signature(numeric: list[str], categorical: list[str], *, task: str = "binary",
                    classes: list[str] | None = None, prediction: str = "prediction",
                    embedding: str | None = None, score: str = "score") -> Any:
    """The pyfunc's signature: every feature by name, of MLflow's ``Any`` type and not required;
    the outputs per task (trainer/pyfunc.py): binary one double, multiclass the prediction column
    (the class name) and ``proba_<class>`` doubles, regression the prediction column (a double).

    Typed columns would make MLflow's schema enforcement refuse the frames users have: an int64
    column against ``double`` ("Can not safely convert int64 to float64"), a pandas ``category``
    or nullable ``Int64``/``boolean`` column, a null in a serving request. The model's own
    preprocessing (trainer/model.py) converts and checks each column and names the bad one;
    the numeric/categorical schema is in the model's metadata and its version tag ``driftloop.schema``.
    With ``embedding`` (a training.entrypoint model with ``embed``) the outputs also hold that
    column, a list of floats per row, and a binary model's P(1) is the ``score`` column of a DataFrame."""
    from mlflow.models import ModelSignature
    from mlflow.types.schema import AnyType, Array, ColSpec, DataType, Schema

    from trainer.pyfunc import output_proba_column

    inputs = Schema([ColSpec(AnyType(), name, required=False) for name in [*numeric, *categorical]])
    if task == "multiclass":
        outputs = Schema([ColSpec(DataType.string, prediction),
                          *(ColSpec(DataType.double, output_proba_column(c)) for c in classes or [])])
    elif task == "regression":
        outputs = Schema([ColSpec(DataType.double, prediction)])
    elif embedding:
        outputs = Schema([ColSpec(DataType.double, score)])
    else:
        outputs = Schema([ColSpec(DataType.double)])
    if embedding:
        outputs = Schema([*outputs.inputs, ColSpec(Array(DataType.float), embedding)])
    return ModelSignature(inputs=inputs, outputs=outputs)


def recorded_schema(registry: "Registry", version: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``({feature: type}, {"target", "id", "score", "prediction": column, "task": task, "classes": [...]})``
    a model version was trained with (None for versions older than these tags; versions from before
    tasks lack ``task`` and are binary)."""
    tags = registry.client.get_model_version(registry.name, version).tags
    if SCHEMA_TAG not in tags:
        return None
    return json.loads(tags[SCHEMA_TAG]), json.loads(tags.get(COLUMNS_TAG, "{}"))


@contextmanager
def _quiet(*loggers: str) -> Iterator[None]:
    """Silence MLflow's per-call chatter (the cloudpickle caution: we pickle on purpose, see
    trainer/pyfunc.py; "unsupported type hint") without hiding its errors."""
    saved = [(logging.getLogger(n), logging.getLogger(n).level) for n in loggers]
    for logger, _ in saved:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in saved:
            logger.setLevel(level)


class ChampionCache:
    """Loaded champions by (store, model, version): the daemon asks every check; loading is seconds."""

    def __init__(self, size: int = 4):
        self.size = size
        self._items: OrderedDict[tuple[str, str, str], Champion] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> Champion | None:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
            return self._items.get(key)

    def put(self, key: tuple[str, str, str], champion: Champion) -> None:
        with self._lock:
            self._items[key] = champion
            while len(self._items) > self.size:
                self._items.popitem(last=False)


_default_cache = ChampionCache()


def load_champion(cfg: DriftloopConfig, *, cache: ChampionCache | None = None) -> Champion:
    """The model behind alias ``champion`` with its baseline; RegistryError if there is none."""
    cache = _default_cache if cache is None else cache
    check_reachable(cfg)
    with translating(cfg, "loading the champion"):
        registry = Registry(cfg)
        version = registry.alias_version(CHAMPION)
        if version is None:
            raise RegistryError(f"registered model {registry.name!r} has no {CHAMPION!r} version; "
                                "train one first with `driftloop train --data FILE`")
        key = (cfg.tracking_uri, registry.name, version)
        cached = cache.get(key)
        if cached is not None:
            return cached
        champion = load_version(cfg, registry, version)
        cache.put(key, champion)
        return champion


def load_version(cfg: DriftloopConfig, registry: Registry, version: str) -> Champion:
    """A registered version with its baseline (the model behind any alias, or none)."""
    import mlflow
    import mlflow.pyfunc
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # no tqdm bars in daemon logs
    run_id = registry.run_id_of(version)
    with tempfile.TemporaryDirectory() as tmp:
        # Resolve the version to its artifact location ourselves: a models:/ URI would be resolved
        # against the process-wide registry URI, not this store.
        source = registry.client.get_model_version_download_uri(registry.name, version)
        local = mlflow.artifacts.download_artifacts(artifact_uri=source,
                                                    dst_path=str(Path(tmp) / "model"), tracking_uri=cfg.tracking_uri)
        model = mlflow.pyfunc.load_model(local).unwrap_python_model().model
        base = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=BASELINE_DIR,
                                                   dst_path=str(Path(tmp) / "baseline"), tracking_uri=cfg.tracking_uri)
        reference = pd.read_parquet(Path(base) / "reference.parquet")
        metrics = json.loads((Path(base) / "metrics.json").read_text())
    model.eval()
    return Champion(version=version, run_id=run_id, predict_proba=model.predict_proba,
                    baseline=Baseline(reference=reference, metrics=metrics), model=model)
