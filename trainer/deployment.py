"""Every registered version's deployment forms, checked before they are published on its run.

For each form (PyTorch as registered, ONNX fp32, ONNX INT8) the table on the run
(``onnx/export.json``, and ``export_*`` metrics) says: file size, parity (max |score difference|
against PyTorch on the reference rows), accuracy and ROC AUC on the held-out rows, and p50/p99
latency for one row and for 1024 rows, each scored from a raw DataFrame as a service would (so
the ONNX figures include turning columns into inputs, and the PyTorch ones ``encode``).

A form is published (logged as ``onnx/model.onnx`` / ``onnx/model.int8.onnx``) only when its
parity is within tolerance (``training.export_parity_tolerance`` for fp32,
``training.int8_parity_tolerance`` for INT8) and it keeps ``training.int8_min_accuracy_ratio`` of
PyTorch's held-out accuracy; otherwise the tag ``driftloop.export.<form>`` says why. Exporting never
fails a training run: any error is recorded (tag ``driftloop.export.error``) and training goes on.
"""
from __future__ import annotations

import json
import logging
import math
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pandas as pd

from monitor.config import DriftloopConfig
from monitor.errors import ExportError
from monitor.onnx_scoring import FORMATS, MANIFEST, OnnxScorer
from trainer.export import OPSET, features_of, to_int8, to_onnx
from trainer.metrics import binary_metrics

log = logging.getLogger(__name__)

ARTIFACT_DIR = "onnx"
SINGLE_ROW_REPEATS, BATCH_ROWS, BATCH_REPEATS = 200, 1024, 15


@dataclass
class Form:
    """One row of the export table."""
    name: str                       # "torch", "onnx" or "onnx-int8"
    size_bytes: int
    parity: float                   # max |score - PyTorch score| on the reference rows
    accuracy: float
    roc_auc: float
    latency_ms: dict[str, float]    # p50_1, p99_1, p50_1024, p99_1024
    published: bool = True
    reason: str = ""                # why not published


@dataclass
class ExportResult:
    forms: dict[str, Form] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)   # published forms only
    error: str | None = None

    def published(self, name: str) -> Form | None:
        form = self.forms.get(name)
        return form if form is not None and form.published else None

    def deployed(self) -> dict[str, float | str] | None:
        """The form a service would run (INT8 when published, else fp32) for the cost gate."""
        form = self.published("onnx-int8") or self.published("onnx")
        if form is None:
            return None
        return {"form": form.name, "size_bytes": form.size_bytes, "p99_1_ms": form.latency_ms["p99_1"]}

    def table(self) -> list[dict[str, Any]]:
        return [asdict(f) for f in self.forms.values()]


def latency(score: Callable[[pd.DataFrame], Any], rows: pd.DataFrame, repeats: int,
            clock: Callable[[], float] = time.perf_counter) -> tuple[float, float]:
    """(p50, p99) milliseconds of ``score(rows)`` over ``repeats`` calls, after one warm-up call."""
    score(rows)
    times = []
    for _ in range(repeats):
        start = clock()
        score(rows)
        times.append((clock() - start) * 1000.0)
    p50, p99 = np.percentile(times, [50, 99])
    return float(p50), float(p99)


def _latencies(score: Callable[[pd.DataFrame], Any], rows: pd.DataFrame, clock: Callable[[], float],
               repeats: int = SINGLE_ROW_REPEATS) -> dict[str, float]:
    batch = rows.sample(n=BATCH_ROWS, replace=len(rows) < BATCH_ROWS, random_state=0).reset_index(drop=True)
    p50_1, p99_1 = latency(score, rows.head(1), repeats, clock)
    p50_b, p99_b = latency(score, batch, max(3, repeats // 13), clock)
    return {"p50_1": p50_1, "p99_1": p99_1, "p50_1024": p50_b, "p99_1024": p99_b}


@contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    """PyTorch on as many threads as the ONNX sessions (one), so the latencies compare like for like."""
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def _quiet_quantizer() -> Iterator[None]:
    """onnxruntime.quantization logs "consider pre-processing" on the root logger on every call."""
    root = logging.getLogger()

    def drop(record: logging.LogRecord) -> bool:
        return "pre-processing" not in record.getMessage() and "pre-process" not in record.getMessage()

    root.addFilter(drop)
    try:
        yield
    finally:
        root.removeFilter(drop)


def export_forms(model: Any, reference: pd.DataFrame, holdout: pd.DataFrame, cfg: DriftloopConfig, *,
                 version: str | None = None, clock: Callable[[], float] = time.perf_counter) -> ExportResult:
    """Build, check and time the ONNX forms of ``model``; never raises for a model that cannot be
    exported (``error`` / each form's ``reason`` say why)."""
    import io

    import torch

    t, target, threshold = cfg.training, cfg.model.target, cfg.model.threshold
    model = model.cpu().eval()
    features = features_of(model)
    manifest: dict[str, Any] = {"version": version, "model": cfg.model.name, "features": features, "threshold": threshold,
                "opset": OPSET, "inputs": "one 1-D input per feature: float32 (NaN = missing) or string",
                "output": "score: P(label = 1), float32 [batch]", "formats": {}}
    result = ExportResult(manifest=manifest)
    y = holdout[target].to_numpy()
    with _torch_threads(1):
        reference_scores = model.predict_proba(reference)
        torch_scores = model.predict_proba(holdout)
        buffer = io.BytesIO()
        torch.save(model.state_dict(), buffer)
        m = binary_metrics(y, torch_scores, threshold)
        result.forms["torch"] = Form("torch", buffer.getbuffer().nbytes, 0.0, m["accuracy"], m["roc_auc"],
                                     _latencies(model.predict_proba, holdout, clock))
        try:
            fp32 = to_onnx(model, reference)
            with _quiet_quantizer():
                built = {"onnx": fp32, "onnx-int8": to_int8(fp32, reference, features)}
        except ExportError as exc:
            result.error = str(exc)
            return result
        tolerances = {"onnx": t.export_parity_tolerance, "onnx-int8": t.int8_parity_tolerance}
        for name, data in built.items():
            scorer = OnnxScorer(data, manifest)
            parity = float(np.max(np.abs(scorer.predict(reference) - reference_scores))) if len(reference) else 0.0
            m = binary_metrics(y, scorer.predict(holdout), threshold)
            timing = _latencies(scorer.predict, holdout, clock)
            form = Form(name, len(data), parity, m["accuracy"], m["roc_auc"], timing)
            form.reason = _refusal(form, result.forms["torch"], tolerances[name], t.int8_min_accuracy_ratio)
            form.published = not form.reason
            result.forms[name] = form
            if form.published:
                result.files[FORMATS[name]] = data
                manifest["formats"][name] = FORMATS[name]
    return result


def _refusal(form: Form, torch_form: Form, tolerance: float, min_ratio: float) -> str:
    if not math.isfinite(form.parity) or form.parity > tolerance:
        return f"parity {form.parity:.3g} exceeds tolerance {tolerance:g} (max |score difference| vs PyTorch)"
    if form.accuracy < min_ratio * torch_form.accuracy:
        return (f"held-out accuracy {form.accuracy:.4f} is below {min_ratio:g} x PyTorch's "
                f"{torch_form.accuracy:.4f}")
    return ""


def log_export(result: ExportResult) -> None:
    """Attach ``result`` to the active MLflow run: published files, manifest, table, metrics, tags."""
    import mlflow

    tags = {"driftloop.export.error": result.error} if result.error else {}
    metrics: dict[str, float] = {}
    for name, form in result.forms.items():
        key = name.replace("-", "_")
        metrics.update({f"export_{key}_size_bytes": float(form.size_bytes), f"export_{key}_parity": form.parity,
                        f"export_{key}_accuracy": form.accuracy, f"export_{key}_roc_auc": form.roc_auc,
                        **{f"export_{key}_latency_{k}_ms": v for k, v in form.latency_ms.items()}})
        if name != "torch":
            tags[f"driftloop.export.{name}"] = "published" if form.published else f"refused: {form.reason}"[:4900]
    mlflow.log_metrics({k: v for k, v in metrics.items() if math.isfinite(v)})
    mlflow.set_tags(tags)
    with tempfile.TemporaryDirectory() as tmp:
        for filename, data in result.files.items():
            (Path(tmp) / filename).write_bytes(data)
        (Path(tmp) / MANIFEST).write_text(json.dumps(result.manifest, indent=2))
        (Path(tmp) / "export.json").write_text(json.dumps({"forms": result.table(), "error": result.error}, indent=2))
        mlflow.log_artifacts(tmp, ARTIFACT_DIR)


def export_and_log(model: Any, reference: pd.DataFrame, holdout: pd.DataFrame, cfg: DriftloopConfig,
                   version: str | None = None) -> ExportResult | None:
    """:func:`export_forms` then :func:`log_export` in the active run, unless ``training.export_onnx``
    is off. Whatever goes wrong is logged and tagged, never raised: the version is registered anyway."""
    if not cfg.training.export_onnx:
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
