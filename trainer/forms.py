"""What every kind of model's export shares (trainer/deployment.py for driftloop's own network,
trainer/entrypoint_export.py for a ``training.entrypoint`` model): the forms' table, their checks
(parity, held-out figures, latency) and the verdict that publishes a form or refuses it. See
trainer/deployment.py for the table of what is checked per task.
"""
from __future__ import annotations

import logging
import math
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator

import numpy as np
import pandas as pd

from monitor.config import DriftloopConfig
from monitor.errors import ExportError
from monitor.onnx_scoring import FORMATS
from monitor.tasks import task_of
from trainer.metrics import task_metrics

SINGLE_ROW_REPEATS, BATCH_ROWS, BATCH_REPEATS = 200, 1024, 15

@dataclass
class Form:
    """One row of the export table; the held-out figures of the task, the others None."""
    name: str                       # "torch", "onnx" or "onnx-int8"
    size_bytes: int
    parity: float                   # max |output - PyTorch's| on the reference rows (see the module doc)
    accuracy: float | None
    roc_auc: float | None           # multiclass: one-vs-rest macro ROC AUC
    latency_ms: dict[str, float]    # p50_1, p99_1, p50_1024, p99_1024
    published: bool = True
    reason: str = ""                # why not published
    mae: float | None = None        # regression
    rmse: float | None = None

    def figures(self) -> dict[str, float]:
        """The task's held-out figures by name."""
        return {k: v for k, v in (("accuracy", self.accuracy), ("roc_auc", self.roc_auc), ("mae", self.mae),
                                  ("rmse", self.rmse)) if v is not None}


@dataclass
class ExportResult:
    forms: dict[str, Form] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)   # published forms only
    error: str | None = None
    task: str = "binary"
    target_scale: float | None = None                       # regression: the parity unit (module doc)

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
        """One row per form, with the held-out figures of its task only."""
        return [{k: v for k, v in asdict(f).items() if v is not None} for f in self.forms.values()]


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


def held_out_figures(task: str, y: np.ndarray, output: np.ndarray, threshold: float) -> dict[str, float]:
    """The export table's figures (the task's two lead figures) of one form's ``output``
    (``predict_proba``'s shape) on labels ``y`` (0/1, class indices or values), as the trainer
    computes them."""
    figures = task_metrics(task, y, output, threshold)
    return {k: figures[k] for k in task_of(task).lead_metrics}


def _form(name: str, size: int, parity: float, figures: dict[str, float], latency_ms: dict[str, float]) -> Form:
    return Form(name, size, parity, figures.get("accuracy"), figures.get("roc_auc"), latency_ms,
                mae=figures.get("mae"), rmse=figures.get("rmse"))


def check_forms(model: Any, reference: pd.DataFrame, holdout: pd.DataFrame, cfg: DriftloopConfig,
                result: ExportResult, build: Callable[[], dict[str, bytes]],
                scorer: Callable[[bytes], Callable[[pd.DataFrame], np.ndarray]], *,
                clock: Callable[[], float] = time.perf_counter, repeats: int = SINGLE_ROW_REPEATS) -> ExportResult:
    """What every kind of model's export shares: the PyTorch form's size, held-out figures and
    latencies; then each form ``build()`` makes (an ExportError is the result's ``error``), scored
    by ``scorer(bytes)`` (rows -> the bare output, as ``predict_proba``): parity with PyTorch on the
    reference rows, held-out figures, latencies and the verdict that publishes it or not."""
    import io

    import torch

    t, target, threshold, task = cfg.training, cfg.model.target, cfg.model.threshold, result.task
    # The parity unit: a regression model's target scale (deployment.py's module doc), else 1.
    unit = task_of(task).parity_unit(model, reference, target)
    if unit is not None:
        result.target_scale = unit
    scale = 1.0 if unit is None else unit
    y = holdout[target].to_numpy()
    with _torch_threads(1):
        reference_output = model.predict_proba(reference)
        buffer = io.BytesIO()
        torch.save(model.state_dict(), buffer)
        result.forms["torch"] = _form("torch", buffer.getbuffer().nbytes, 0.0,
                                      held_out_figures(task, y, model.predict_proba(holdout), threshold),
                                      _latencies(model.predict_proba, holdout, clock, repeats))
        try:
            built = build()
        except ExportError as exc:
            result.error = str(exc)
            return result
        tolerances = {"onnx": t.export.parity_tolerance, "onnx-int8": t.export.int8_parity_tolerance}
        for name, data in built.items():
            score = scorer(data)
            parity = (float(np.max(np.abs(score(reference) - reference_output))) / scale
                      if len(reference) else 0.0)
            form = _form(name, len(data), parity, held_out_figures(task, y, score(holdout), threshold),
                         _latencies(score, holdout, clock, repeats))
            form.reason = _refusal(task, form, result.forms["torch"], tolerances[name],
                                   t.export.int8_min_accuracy_ratio)
            form.published = not form.reason
            result.forms[name] = form
            if form.published:
                result.files[FORMATS[name]] = data
                result.manifest["formats"][name] = FORMATS[name]
    return result


def _refusal(task: str, form: Form, torch_form: Form, tolerance: float, min_ratio: float) -> str:
    """Why ``form`` is not published (``""``: it is): its parity, then its held-out figures
    against PyTorch's as the task judges them (a classifier's accuracy, a regression's MAE)."""
    kind = task_of(task)
    if not math.isfinite(form.parity) or form.parity > tolerance:
        return f"parity {form.parity:.3g} exceeds tolerance {tolerance:g} ({kind.parity_text})"
    return kind.held_out_refusal(form.figures(), torch_form.figures(), min_ratio)
