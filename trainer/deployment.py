"""Every registered version's deployment forms, checked before they are published on its run.

For each form (PyTorch as registered, ONNX fp32, ONNX INT8) the table on the run
(``onnx/export.json``, and ``export_*`` metrics) says: file size, parity against PyTorch on the
reference rows, the held-out figures, and p50/p99 latency for one row and for 1024 rows, each
scored from a raw DataFrame as a service would (so the ONNX figures include turning columns into
inputs, and the PyTorch ones ``encode``). By the model's ``task``:

============  ===============================================  ====================  ===================
task          parity (max over the reference rows)              held-out figures      kept (vs PyTorch)
============  ===============================================  ====================  ===================
binary        |P(1) difference|                                 accuracy, ROC AUC     accuracy >= r x
multiclass    |difference| over every class probability        accuracy, macro       accuracy >= r x
                                                                ROC AUC (one-vs-rest)
regression    |prediction difference| / the target's scale     MAE, RMSE             MAE <= 1/r x
============  ===============================================  ====================  ===================

with r = ``training.export.int8_min_accuracy_ratio``. The regression scale is the standard deviation of
the target on the reference rows (the training target's, ``target_std``, when those have none or it
is 0), so a tolerance means the same for a price in dollars and a rate in percent: parity 1e-4 is a
difference of one ten-thousandth of the target's spread.

A form is published (logged as ``onnx/model.onnx`` / ``onnx/model.int8.onnx``) only when its
parity is within tolerance (``training.export.parity_tolerance`` for fp32,
``training.export.int8_parity_tolerance`` for INT8) and it keeps its held-out figure as above; otherwise
the tag ``driftloop.export.<form>`` says why. Exporting never fails a training run: any error is
recorded (tag ``driftloop.export.error``) and training goes on. A ``training.entrypoint`` model is
exported by trainer/entrypoint_export.py (a tensor input; refused with the reason where it does not trace).
"""
from __future__ import annotations

import json
import logging
import math
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from monitor.config import DriftloopConfig
from monitor.onnx_scoring import MANIFEST, OUTPUT_TEXT, OnnxScorer
from trainer.export import OPSET, features_of, task_of, to_int8, to_onnx
from trainer.forms import ExportResult, _quiet_quantizer, check_forms

log = logging.getLogger(__name__)

ARTIFACT_DIR = "onnx"


def _manifest(model: Any, cfg: DriftloopConfig, version: str | None, task: str) -> dict[str, Any]:
    manifest: dict[str, Any] = {"version": version, "model": cfg.model.name, "features": features_of(model),
                                "task": task, "classes": getattr(model, "classes", None)}
    kind = task_of(model)
    # the threshold (binary) or the pyfunc's (and OnnxScorer.predict's) prediction column
    manifest.update({**kind.threshold_field(cfg.model.threshold), **kind.prediction_field(cfg.model.prediction)})
    manifest.update({"opset": OPSET, "inputs": "one 1-D input per feature: float32 (NaN = missing) or string",
                     "output": OUTPUT_TEXT[task], "formats": {}})
    return manifest


def export_forms(model: Any, reference: pd.DataFrame, holdout: pd.DataFrame, cfg: DriftloopConfig, *,
                 version: str | None = None, clock: Callable[[], float] = time.perf_counter) -> ExportResult:
    """Build, check and time the ONNX forms of ``model``; never raises for a model that cannot be
    exported (``error`` / each form's ``reason`` say why)."""
    if getattr(model, "spec", None):  # a training.entrypoint model: its input is a tensor, not columns
        from trainer.entrypoint_export import export_forms as export_entrypoint
        return export_entrypoint(model, reference, holdout, cfg, version=version, clock=clock)
    model = model.cpu().eval()
    task = task_of(model)
    features = features_of(model)
    manifest = _manifest(model, cfg, version, task)

    def build() -> dict[str, bytes]:
        fp32 = to_onnx(model, reference)
        with _quiet_quantizer():
            return {"onnx": fp32, "onnx-int8": to_int8(fp32, reference, features, task)}

    return check_forms(model, reference, holdout, cfg, ExportResult(manifest=manifest, task=task), build,
                       lambda data: OnnxScorer(data, manifest).predict_proba, clock=clock)


def log_export(result: ExportResult) -> None:
    """Attach ``result`` to the active MLflow run: published files, manifest, table, metrics, tags."""
    import mlflow

    tags = {"driftloop.export.error": result.error} if result.error else {}
    metrics: dict[str, float] = {}
    for name, form in result.forms.items():
        key = name.replace("-", "_")
        metrics.update({f"export_{key}_size_bytes": float(form.size_bytes), f"export_{key}_parity": form.parity,
                        **{f"export_{key}_{k}": v for k, v in form.figures().items()},
                        **{f"export_{key}_latency_{k}_ms": v for k, v in form.latency_ms.items()}})
        if name != "torch":
            tags[f"driftloop.export.{name}"] = "published" if form.published else f"refused: {form.reason}"[:4900]
    mlflow.log_metrics({k: v for k, v in metrics.items() if math.isfinite(v)})
    mlflow.set_tags(tags)
    with tempfile.TemporaryDirectory() as tmp:
        for filename, data in result.files.items():
            (Path(tmp) / filename).write_bytes(data)
        (Path(tmp) / MANIFEST).write_text(json.dumps(result.manifest, indent=2))
        table: dict[str, Any] = {"task": result.task, "forms": result.table(), "error": result.error}
        if result.target_scale is not None:
            table["target_scale"] = result.target_scale
        (Path(tmp) / "export.json").write_text(json.dumps(table, indent=2))
        mlflow.log_artifacts(tmp, ARTIFACT_DIR)


def export_and_log(model: Any, reference: pd.DataFrame, holdout: pd.DataFrame, cfg: DriftloopConfig,
                   version: str | None = None) -> ExportResult | None:
    """:func:`export_forms` then :func:`log_export` in the active run, unless ``training.export.onnx``
    is off. Whatever goes wrong is logged and tagged, never raised: the version is registered anyway."""
    if not cfg.training.export.onnx:
        return None
    try:
        result = export_forms(model, reference, holdout, cfg, version=version)
    except Exception as exc:  # a bug or an odd model must not cost the training run
        log.warning("ONNX export of v%s failed: %s", version, exc, exc_info=True)
        result = ExportResult(error=f"{type(exc).__name__}: {str(exc)[:300]}")
    try:
        log_export(result)
    except Exception as exc:
        log.warning("could not record the ONNX export of v%s on its run: %s", version, exc)
    if result.error:
        log.warning("ONNX export of v%s not published: %s", version, result.error)
    return result
