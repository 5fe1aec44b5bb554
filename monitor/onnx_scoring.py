"""Scoring a raw feature DataFrame with an exported ONNX model (trainer/export.py), without torch.

An exported model takes one input per feature, named like the feature: ``float32 [batch]`` for a
numeric one (NaN = missing; the graph imputes and flags it as the PyTorch model does),
``float32 [batch, dim]`` for an embedding (a column of vectors, the frame contract; a missing
vector is a NaN row) and ``string [batch]`` for a categorical one (the vocabulary lookup is in the graph; an unseen
category falls into the unknown bucket). Its one output is the model's served output, by ``task``: ``score``
P(label = 1) ``[batch]`` (binary), ``probabilities`` ``[batch, K]`` in the order of ``classes``
(multiclass), ``prediction`` the value in the target's units ``[batch]`` (regression). The
manifest written next to it (``manifest.json``) names the features and their types, the task,
the classes, the threshold (binary), the prediction column (multiclass, regression) and the
version; a manifest without ``task`` is binary.

:meth:`OnnxScorer.predict` returns what the MLflow pyfunc returns (so a service does
``features.join(scorer.predict(features))`` and sends that), :meth:`OnnxScorer.predict_proba`
the bare output as the PyTorch model's ``predict_proba`` does (for parity checks).

So the only preprocessing left to the caller is turning columns into those arrays, which
:func:`feeds` does by the same rules as the PyTorch model's ``encode``: numbers as float, integer
category codes as ``"3"`` (monitor.records.frames' copy of the rule, since this side may not
import torch), a missing category as the model's ``MISSING`` marker, an infinity refused with the
feature named. Imports onnxruntime and pandas, never torch, so a model service runs without it;
onnxruntime only when a scorer is made (``driftloop-client`` installs it with ``[onnx]``; without it
:class:`OnnxScorer` raises :class:`monitor.client_errors.MissingExtra` naming that extra).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from monitor.client_errors import import_extra
from monitor.embeddings import matrix
from monitor.errors import UserInputError
from monitor.tasks import TASKS, task_of

MISSING = "\x00missing"  # trainer.model.MISSING: the vocabulary entry of a missing category
MANIFEST = "manifest.json"
FORMATS = {"onnx": "model.onnx", "onnx-int8": "model.int8.onnx"}
# The graph's one output per task, and what it holds (the manifest's "output"): the tasks' own.
OUTPUTS = {name: task_of(name).record_output for name in TASKS}
OUTPUT_TEXT = {name: task_of(name).output_text for name in TASKS}


def feeds(frame: pd.DataFrame, features: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """``{feature: 1-D array}`` for an exported model; ValueError naming a missing, non-numeric or
    infinite feature (the PyTorch model's messages, so both runtimes refuse the same rows).

    Per-call cost matters here (at one row it is most of the scoring time), so the common columns
    take a fast path: plain float/int ones converted directly, text ones passed as they are."""
    absent = [f["name"] for f in features if f["name"] not in frame.columns]
    if absent:
        raise ValueError(f"missing feature columns: {', '.join(absent)}")
    return {f["name"]: _categories(frame, f["name"]) if f["type"] == "categorical"
            else _vectors(frame[f["name"]], f["name"], int(f["dim"])) if f["type"] == "embedding"
            else _numeric(frame[f["name"]], f["name"]) for f in features}


def _vectors(column: pd.Series, name: str, dim: int) -> np.ndarray:
    """An embedding column as ``float32 [n, dim]``, NaN rows where missing (trainer.model.embedding_values' rule)."""
    try:
        values = matrix(column, dim)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"feature {name!r}: {exc}") from None
    infinite = np.isinf(values)
    if infinite.any():
        raise ValueError(f"feature {name!r} has {int(infinite.sum())} infinite value(s)")
    return np.ascontiguousarray(values)


def _categories(frame: pd.DataFrame, name: str) -> np.ndarray:
    """Category text, missing as the model's MISSING marker."""
    values = frame[name].to_numpy(dtype=object)
    if all(type(v) is str for v in values):  # the usual case, already text
        return values
    from monitor.records.frames import _category_text
    return np.array([MISSING if v is None else v for v in _category_text(frame, name)], dtype=object)


def _numeric(column: pd.Series, name: str) -> np.ndarray:
    # trainer.model.numeric_values' rule, repeated: that module travels pickled by value into
    # the model and may import nothing of driftloop, and this one may not import torch.
    # tests/trainer/test_export.py holds both to the same values and the same refusals.
    if column.dtype.kind in "fiu":  # plain numpy numbers (NaN = missing): nothing to check but infinity
        values = column.to_numpy(np.float32)
        infinite = np.isinf(values)
        if infinite.any():
            raise ValueError(f"feature {name!r} has {int(infinite.sum())} infinite value(s)")
        return values
    if isinstance(column.dtype, pd.CategoricalDtype):
        column = column.astype(object)
    try:
        values = column.to_numpy(np.float32, na_value=np.nan)
    except (TypeError, ValueError):
        coerced = pd.to_numeric(column, errors="coerce")
        bad = coerced.isna() & column.notna()
        if bad.any():
            raise ValueError(f"feature {name!r} must be numeric; row {int(np.argmax(bad.to_numpy()))} holds "
                             f"{column[bad].iloc[0]!r}") from None
        values = coerced.to_numpy(np.float32, na_value=np.nan)
    infinite = np.isinf(values)
    if infinite.any():
        raise ValueError(f"feature {name!r} has {int(infinite.sum())} infinite value(s)")
    return values


class OnnxScorer:
    """An ONNX Runtime session over one exported model and its manifest.

    ``predict(frame)`` returns what the pyfunc's ``predict`` returns, by task: P(label = 1) as a
    float64 array (binary); a DataFrame with the prediction column (the manifest's ``prediction``,
    ``model.prediction``, default ``prediction``) holding the class name and one ``proba_<class>``
    column per class (multiclass); a DataFrame with the prediction column holding the value
    (regression). DataFrames keep ``frame``'s index. One intra-op thread by default: a model this small gains
    nothing from more, and a service runs one scorer per worker."""

    def __init__(self, model: bytes | str | Path, manifest: Mapping[str, Any], *, threads: int = 1):
        ort = import_extra("onnxruntime", "onnx")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # warnings about unused initialisers are not the caller's business
        source = model if isinstance(model, bytes) else str(model)
        self.session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
        self.manifest = dict(manifest)
        self.features: list[dict[str, Any]] = list(self.manifest["features"])
        self.task: str = str(self.manifest.get("task") or "binary")
        self._task = task_of(self.task)
        self.classes: list[str] | None = self.manifest.get("classes")
        if self._task.n_outputs(self.classes) < 1:  # one output per class, and no classes
            raise UserInputError(f"a {self.task} model's manifest must list its classes")
        self._output = self.session.get_outputs()[0].name

    @classmethod
    def from_dir(cls, folder: str | Path, fmt: str = "onnx", **kwargs: Any) -> "OnnxScorer":
        """The scorer for a folder written by ``driftloop export`` (or a version's ``onnx/`` artifacts)."""
        folder = Path(folder)
        if fmt not in FORMATS:
            raise UserInputError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
        path, manifest = folder / FORMATS[fmt], folder / MANIFEST
        for p in (path, manifest):
            if not p.is_file():
                raise UserInputError(f"{p} not found: not an exported model folder (driftloop export writes one)")
        return cls(path, json.loads(manifest.read_text()), **kwargs)

    @property
    def threshold(self) -> float:
        return float(self.manifest.get("threshold", 0.5))

    def predict(self, frame: pd.DataFrame) -> np.ndarray | pd.DataFrame:
        """The pyfunc's output for ``frame`` (see the class doc)."""
        return served(self.predict_proba(frame), self.task, self.classes, frame.index,
                      str(self.manifest.get("prediction") or "prediction"))

    def predict_proba(self, frame: pd.DataFrame) -> np.ndarray:
        """The graph's output as float64, like the PyTorch model's ``predict_proba``: ``(n,)``
        P(1), ``(n, K)`` class probabilities, or ``(n,)`` predicted values."""
        if len(frame) == 0:
            return self._task.output_array(np.zeros((0, self._task.n_outputs(self.classes))))
        return self.predict_feeds(feeds(frame, self.features))

    def predict_feeds(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """The output for already-converted inputs (see :func:`feeds`): the model alone, for benchmarks."""
        (out,) = self.session.run([self._output], inputs)
        out = np.asarray(out, dtype=np.float64)
        return self._task.output_array(out)


def served(output: np.ndarray, task: str, classes: list[str] | None, index: Any = None,
           prediction: str = "prediction") -> np.ndarray | pd.DataFrame:
    """A model's output as a service gets it (the pyfunc's form, see :class:`OnnxScorer`); ``index``:
    the scored frame's, so that ``features.join(...)`` lines rows up; ``prediction``: the name of
    the prediction column."""
    return task_of(task).service_output(output, classes, index, prediction)


def download_published(client: Any, tracking_uri: str, name: str, version: str, fmt: str, dst: str | Path) -> Path:
    """Download registered version ``version``'s ONNX form ``fmt`` and its manifest (artifacts
    ``onnx/`` of its run) into ``dst``; the folder they are in. UserInputError naming why when
    the version has no such published form (refused by its checks, exported before ONNX, failed)."""
    import mlflow.artifacts

    if fmt not in FORMATS:
        raise UserInputError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    from mlflow.exceptions import MlflowException
    try:
        mv = client.get_model_version(name, version)
    except MlflowException as exc:
        if exc.error_code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE", "NOT_FOUND"):
            raise UserInputError(f"registered model {name!r} has no version {version!r}") from exc
        raise
    tags = client.get_run(mv.run_id).data.tags
    status = tags.get(f"driftloop.export.{fmt}") or tags.get("driftloop.export.error")
    if status != "published":
        why = status or "it was registered without an ONNX export"
        raise UserInputError(f"{name} v{version} has no published {fmt} form: {why}")
    local = mlflow.artifacts.download_artifacts(run_id=mv.run_id, artifact_path="onnx", dst_path=str(dst),
                                                tracking_uri=tracking_uri)
    return Path(local)
