"""Scoring with whatever model is champion now, following promotions and rollbacks: :class:`Champion`,
the model behind a registered model's ``champion`` alias in MLflow, for a model service. Import it
from :mod:`monitor.client` (with the client that sends its predictions)::

    from monitor.client import Champion
    champion = Champion("sqlite:///driftloop-data/mlflow.db", "driftloop-churn")  # or http://mlflow:5000
    scores = champion.predict(frame)     # champion.version says which version scored them

or by a monitored model's driftloop name, its registered model found as the daemon finds it
(``mlflow.registered_model``, default ``driftloop-<name>``)::

    champion = Champion.for_model("churn", config="driftloop.yaml")   # its tracking URI too
    champion = Champion.for_model("churn", tracking_uri="http://mlflow:5000")  # driftloop-churn

Light to import: mlflow, and for the ONNX runtimes :mod:`monitor.onnx_scoring`, are imported when a
:class:`Champion` is made, so a service that only sends data never pays for them.
"""
from __future__ import annotations

import os
import threading
from typing import Any, Protocol

from monitor.client_errors import ClientError, import_extra

RUNTIMES = ("torch", "onnx", "onnx-int8")


class ModelRegistryConfig(Protocol):
    """What :meth:`Champion.for_model` reads of one model's configuration
    (:class:`monitor.config.DriftloopConfig`)."""

    @property
    def tracking_uri(self) -> str: ...

    @property
    def registered_model_name(self) -> str: ...


class DeploymentConfig(Protocol):
    """A loaded driftloop configuration (``monitor.config.load_config(path)``), of one model or several."""

    def for_model(self, name: str | None) -> ModelRegistryConfig: ...


def registry_names(model: str, *, tracking_uri: str | None = None,
                   config: str | os.PathLike[str] | DeploymentConfig | None = None) -> tuple[str, str]:
    """``(tracking URI, registered model name)`` of driftloop model ``model``.

    With ``config`` (a driftloop configuration file, or one already loaded): that model's
    ``mlflow.registered_model`` (default ``driftloop-<model>``) and tracking URI, read as the daemon
    reads them (``DRIFTLOOP_*`` variables included); ``tracking_uri`` given wins over the file's.
    Reading a file needs the full driftloop install (``driftloop-client`` has no configuration
    loader). Without ``config``: ``driftloop-<model>`` at ``tracking_uri``, which is then required.
    :class:`monitor.errors.ConfigError` for a file that does not validate or has no such model."""
    if config is None:
        if tracking_uri is None:
            raise ValueError("give tracking_uri=, or config= (a driftloop configuration) to read it from")
        # The default DriftloopConfig.registered_model_name gives a model without mlflow.registered_model;
        # tests/monitor/ingest/test_client_many_models.py holds the two equal.
        return tracking_uri, f"driftloop-{model}"
    if isinstance(config, (str, os.PathLike)):
        config = _load_config(config)
    model_cfg = config.for_model(model)  # ConfigError (a DriftloopError) naming the models it has
    return tracking_uri or model_cfg.tracking_uri, model_cfg.registered_model_name


def _load_config(path: str | os.PathLike[str]) -> DeploymentConfig:
    try:
        from monitor.config import load_config  # the full install only: scripts/build_client.py FULL_INSTALL_ONLY
    except ModuleNotFoundError as exc:
        if exc.name not in ("monitor", "monitor.config"):
            raise  # the full install, broken: not a light one
        raise ClientError(f"reading a driftloop configuration ({os.fspath(path)}) needs the full driftloop "
                          "install; with driftloop-client pass tracking_uri= instead (and, when the model sets "
                          "mlflow.registered_model, use Champion(tracking_uri, that name))") from exc
    return load_config(path)


def _signature_columns(model: Any, frame: Any) -> Any:
    """``frame`` with only the columns a pyfunc's signature names: MLflow warns on every call about
    any other (the id, the label, a timestamp) and then ignores it. A frame with no others, not a
    DataFrame, or a model without named inputs (an ONNX scorer) is passed as it is; a missing
    input stays MLflow's error to name."""
    metadata = getattr(model, "metadata", None)
    schema = metadata.get_input_schema() if metadata is not None else None
    if schema is None or not schema.has_input_names() or not hasattr(frame, "columns"):
        return frame
    names = set(schema.input_names())
    keep = [c for c in frame.columns if c in names]
    return frame if len(keep) == len(frame.columns) else frame[keep]


class Champion:
    """The model behind a registered model's alias (``champion``), followed as it moves.

    Loads the aliased version at construction; then every ``interval`` seconds a background
    thread asks MLflow which version the alias points at (one small registry call) and, when it
    changed (a promotion, a rollback), loads that version and swaps it in. A swap is one
    assignment of a ``(version, model)`` pair, so :meth:`predict` scores a whole frame with one
    model and :attr:`version` names it; a failed poll or load keeps serving the current model
    (``last_error`` says why). ``interval=0``: no thread; call :meth:`refresh` yourself.

    ``runtime``: ``"torch"`` loads the MLflow pyfunc (PyTorch); ``"onnx"`` / ``"onnx-int8"`` load
    the version's exported ONNX form (``driftloop export``'s files) into ONNX Runtime, so the
    service needs neither torch nor driftloop's trainer. A version without that published form
    is not loaded (``last_error`` says why; the current model keeps serving).

    :meth:`predict` returns the same in every runtime, by the model's task: P(label = 1) as a numpy
    array (binary); a DataFrame with ``prediction`` (the class name) and one ``proba_<class>``
    column per class (multiclass); a DataFrame with ``prediction`` (regression). DataFrames keep
    the frame's index, so ``features.join(champion.predict(features))`` is what
    :meth:`monitor.client.DriftloopClient.log_predictions` takes.

    Needs mlflow (imported when a Champion is made, not with this module): ``driftloop-client``
    installs it with ``[registry]``, and without it a Champion raises
    :class:`monitor.client_errors.MissingExtra` naming that extra.

    ``name`` is the MLflow registered model; :meth:`for_model` takes a monitored model's driftloop
    name instead."""

    def __init__(self, tracking_uri: str, name: str, *, alias: str = "champion", interval: float = 30.0,
                 runtime: str = "torch"):
        MlflowClient = import_extra("mlflow", "registry").MlflowClient
        if runtime not in RUNTIMES:
            raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
        self.tracking_uri, self.name, self.alias, self.interval = tracking_uri, name, alias, interval
        self.runtime = runtime
        self._client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
        self._current: tuple[str, Any] = self._load(self._aliased_version())
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if interval > 0:
            self._thread = threading.Thread(target=self._follow, name=f"champion-{name}", daemon=True)
            self._thread.start()

    @classmethod
    def for_model(cls, model: str, *, tracking_uri: str | None = None,
                  config: str | os.PathLike[str] | DeploymentConfig | None = None, alias: str = "champion",
                  interval: float = 30.0, runtime: str = "torch") -> "Champion":
        """The champion of driftloop model ``model`` (one of a deployment's ``models:``, or the
        only one): its registered model and tracking URI as :func:`registry_names` resolves them
        from ``config`` (a driftloop configuration file, or one loaded) or ``tracking_uri``."""
        uri, name = registry_names(model, tracking_uri=tracking_uri, config=config)
        return cls(uri, name, alias=alias, interval=interval, runtime=runtime)

    @property
    def version(self) -> str:
        return self._current[0]

    def predict(self, frame: Any) -> Any:
        """The current version's output for ``frame`` (see the class doc: an array or a DataFrame,
        by task). For the version that scored them, use :meth:`score`, which returns both from the
        same model."""
        return self.score(frame)[1]

    def score(self, frame: Any) -> tuple[str, Any]:
        version, model = self._current  # one read: the version and the model belong together
        return version, model.predict(_signature_columns(model, frame))

    def refresh(self) -> bool:
        """Poll the alias now; load and swap when it moved. True when the version changed."""
        version = self._aliased_version()
        if version == self._current[0]:
            return False
        self._current = self._load(version)
        return True

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.interval + 5)

    def __enter__(self) -> "Champion":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _follow(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.refresh()
                self.last_error = None
            except Exception as exc:  # keep serving the model we have; say why on the object
                self.last_error = f"{type(exc).__name__}: {exc}"

    def _aliased_version(self) -> str:
        from mlflow.exceptions import MlflowException
        try:
            return str(self._client.get_model_version_by_alias(self.name, self.alias).version)
        except MlflowException as exc:
            raise ClientError(f"registered model {self.name!r} has no {self.alias!r} alias at "
                              f"{self.tracking_uri}: {str(exc).splitlines()[0]}") from exc

    def _load(self, version: str) -> tuple[str, Any]:
        import tempfile

        import mlflow.artifacts
        if self.runtime != "torch":
            return version, self._load_onnx(version)
        import mlflow.pyfunc
        # Resolved through this registry, not the process-wide one a models:/ URI would use.
        source = self._client.get_model_version_download_uri(self.name, version)
        with tempfile.TemporaryDirectory() as tmp:
            local = mlflow.artifacts.download_artifacts(artifact_uri=source, dst_path=tmp,
                                                        tracking_uri=self.tracking_uri)
            model = mlflow.pyfunc.load_model(local)
        return version, model

    def _load_onnx(self, version: str) -> Any:
        import json
        import tempfile

        from monitor.onnx_scoring import FORMATS, MANIFEST, OnnxScorer, download_published
        with tempfile.TemporaryDirectory() as tmp:
            folder = download_published(self._client, self.tracking_uri, self.name, version, self.runtime, tmp)
            model, manifest = (folder / FORMATS[self.runtime]).read_bytes(), json.loads((folder / MANIFEST).read_text())
        return OnnxScorer(model, manifest)
