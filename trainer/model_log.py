"""Logging a trained model to MLflow: the baseline artifacts, the pyfunc with its signature, and the
version tags that record what the model was trained on (read back by :func:`recorded_schema`).

Re-exported by :mod:`trainer.registry` (``reg.log_model``), whose :class:`~trainer.registry.Registry`
registers the version; imported from there at type-checking time only, so the two modules do not
import each other when they load.
"""
from __future__ import annotations

import json
import logging
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import pandas as pd

from monitor.tasks import task_of
from trainer.outcomes import Baseline

if TYPE_CHECKING:
    from trainer.registry import Registry

BASELINE_DIR = "baseline"
SCHEMA_TAG = "driftloop.schema"  # {feature: "numeric" | "categorical" | {"type": "embedding", "dim": N}}, as JSON
COLUMNS_TAG = "driftloop.columns"  # {"target", "id", "score", "prediction": column name, "task", "classes"}, as JSON
TASK_TAG = "driftloop.task"  # binary | multiclass | regression, for people browsing the registry


def log_baseline(baseline: Baseline) -> None:
    """Attach ``baseline`` to the active run as ``baseline/reference.parquet`` + ``baseline/metrics.json``
    (+ ``baseline/intervals.json``: how precisely the held-out rows measured those figures)."""
    import mlflow
    with tempfile.TemporaryDirectory() as tmp:
        baseline.reference.to_parquet(Path(tmp) / "reference.parquet", index=False)
        (Path(tmp) / "metrics.json").write_text(json.dumps(baseline.metrics, indent=2))
        if baseline.intervals:
            (Path(tmp) / "intervals.json").write_text(json.dumps(baseline.intervals, indent=2))
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
    entry: dict[str, Any] = {"entrypoint": spec} if spec else {}
    if spec:
        from monitor.embeddings import INPUT_URI
        from trainer.entrypoint import code_paths
        signature = input_signature([INPUT_URI, m.id], [], task=task, classes=getattr(model, "classes", None),
                                    prediction=m.prediction, embedding=embedding, score=m.score)
        # dataschema.schema_of's form
        schema = {f.name: f.type if f.dim is None else {"type": f.type, "dim": f.dim} for f in m.features}
        extra: dict[str, Any] = {"code_paths": code_paths(spec)}
        artifacts = getattr(model, "artifacts", None)  # prepare_artifacts' files, pickled with the weights
        if artifacts is not None:  # listed in the MLmodel file, for people reading the version
            entry["entrypoint_artifacts"] = artifacts.manifest()
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
                                       metadata={SCHEMA_TAG: schema, **entry},
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

    inputs = Schema([ColSpec(AnyType(), name, required=False) for name in [*numeric, *categorical]])
    outputs = Schema([ColSpec(getattr(DataType, kind), name) for kind, name
                      in task_of(task).signature_outputs(prediction, score if embedding else None, classes)])
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
