"""Scoring with whatever model is champion now, following promotions and rollbacks: :class:`Champion`,
the model behind a registered model's ``champion`` alias in MLflow, for a model service. Import it
from :mod:`monitor.client` (with the client that sends its predictions)::

    from monitor.client import Champion
    champion = Champion("sqlite:///driftloop-data/mlflow.db", "driftloop-churn")  # or http://mlflow:5000
    scores = champion.predict(frame)     # champion.version says which version scored them

Light to import: mlflow, and for the ONNX runtimes :mod:`monitor.onnx_scoring`, are imported when a
:class:`Champion` is made, so a service that only sends data never pays for them.
"""
from __future__ import annotations

import threading
from typing import Any

from monitor.client_errors import ClientError, import_extra

RUNTIMES = ("torch", "onnx", "onnx-int8")


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
    :class:`monitor.client_errors.MissingExtra` naming that extra."""

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
        return version, model.predict(frame)

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
