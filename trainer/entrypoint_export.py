"""The deployment forms of a ``training.entrypoint`` model (trainer/entrypoint.py): the same table
as trainer/deployment.py (PyTorch, ONNX fp32, ONNX INT8; size, parity on the reference rows,
held-out figures, latencies), for a network whose input is what the user's dataset yields.

The graph takes the tensors the entrypoint declares in ``input_spec`` (names, dtypes, dynamic axes:
token ids as int64, a mask, a sequence axis whose length varies from batch to batch), collated by
its ``collate``; without declarations one float32 tensor ``input`` (a batch of
``dataset(refs, train=False)`` items, dynamic batch axis). It returns the task's served output
(:data:`monitor.onnx_scoring.OUTPUTS`), traced by ``torch.onnx.export`` (TorchScript exporter, as
trainer/export.py) on a batch of reference inputs. A model that does not trace is refused, with
the reason on the run (tag ``driftloop.export.error``), and training goes on: the exporter failing,
another number of input tensors than declared (one without ``input_spec``), or a *TracerWarning*,
which says the trace took a Python branch or constant from this batch's values (``if x.mean() > 0``,
``.item()``, numpy) and so may be wrong for another batch.
INT8 is static quantization as for tabular models, of the Conv, Gemm and MatMul nodes (the output
layer of a multiclass or regression model stays fp32), calibrated on the reference inputs.
Latencies include reading the inputs through the user's dataset, as a service scores a row.
"""
from __future__ import annotations

import io
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch

from monitor.config import DriftloopConfig
from monitor.errors import ExportError
from monitor.onnx_scoring import OUTPUT_TEXT, OUTPUTS
from monitor.tasks import task_of
from trainer.forms import ExportResult, _quiet_quantizer, check_forms
from trainer.entrypoint_model import InputSpec
from trainer.export import OPSET, _matmuls

INPUT = "input"
LATENCY_REPEATS = 30  # single-row timings: each reads the row's input through the user's dataset
QUANTIZED = ["Conv", "Gemm", "MatMul"]


Batch = list[np.ndarray]  # one collated batch: an array per input tensor, in forward's order


def input_specs(model: Any) -> list[InputSpec]:
    """The graph's inputs: the entrypoint's declarations (``input_spec``), else today's one float32
    tensor named ``input`` whose first axis is the batch."""
    return model.input_specs or [InputSpec(INPUT, "float32", ("batch",))]


def _batches(model: Any, rows: pd.DataFrame) -> list[Batch]:
    """The rows' inputs (train=False), collated as in training, each tensor in its declared dtype;
    ExportError when the dataset yields another number of tensors than the graph takes."""
    specs, out = input_specs(model), []
    for batch in model.batches(rows):
        if len(batch) != len(specs):
            raise ExportError(f"the model takes {len(batch)} input tensors; the graph has {len(specs)} "
                              + ("(declare them with input_spec)" if model.input_specs is None else
                                 f"({', '.join(s.name for s in specs)}, as input_spec declares)"))
        out.append([t.cpu().to(spec.torch_dtype).numpy() for t, spec in zip(batch, specs)])
    if not out:
        raise ExportError("no reference rows to trace the model with")
    return out


def _trace(model: Any, example: Batch) -> bytes:
    task = model.task
    specs = input_specs(model)

    class Scoring(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *x: torch.Tensor) -> torch.Tensor:
            return self.model.output(self.model(*x))

    out, buffer = OUTPUTS[task], io.BytesIO()
    axes: dict[str, dict[int, str]] = {s.name: s.dynamic_axes() for s in specs}
    axes[out] = {0: "batch"}
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        try:
            torch.onnx.export(Scoring().eval(), tuple(torch.from_numpy(a) for a in example), buffer,  # type: ignore[arg-type]
                              input_names=[s.name for s in specs], output_names=[out], opset_version=OPSET,
                              dynamo=False, dynamic_axes=axes)
        except Exception as exc:  # the exporter raises anything from TypeError to its own errors
            raise ExportError(f"the model does not trace: torch.onnx.export failed: {type(exc).__name__}: "
                              f"{str(exc)[:300]}") from exc
    tracer = [w for w in caught if issubclass(w.category, torch.jit.TracerWarning)]
    if tracer:
        raise ExportError(f"the model does not trace: {str(tracer[0].message)[:300]}")
    return buffer.getvalue()


def _feeds(names: list[str], batch: Batch) -> dict[str, np.ndarray]:
    return dict(zip(names, batch))


def _int8(fp32: bytes, calibration: list[Batch], names: list[str], task: str) -> bytes:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Batches(CalibrationDataReader):
        def __init__(self) -> None:
            self._items = iter([_feeds(names, b) for b in calibration])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._items, None)

    with tempfile.TemporaryDirectory() as tmp, _quiet_quantizer():
        source, target = Path(tmp) / "model.onnx", Path(tmp) / "model.int8.onnx"
        source.write_bytes(fp32)
        try:
            quantize_static(str(source), str(target), Batches(), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                            op_types_to_quantize=QUANTIZED,
                            nodes_to_exclude=task_of(task).int8_fp32_outputs(_matmuls(fp32)))
        except Exception as exc:
            raise ExportError(f"INT8 quantization failed: {type(exc).__name__}: {str(exc)[:300]}") from exc
        return target.read_bytes()


def _session(data: bytes, names: list[str]) -> Callable[[Batch], np.ndarray]:
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    return lambda batch: np.asarray(session.run(None, _feeds(names, batch))[0], dtype=np.float64)


def _scorer(model: Any, run: Callable[[Batch], np.ndarray]) -> Callable[[pd.DataFrame], np.ndarray]:
    """Rows -> the form's output, reading the inputs as a service would (batch by batch: a batch of
    variable-length items is padded, or offset, on its own)."""
    return lambda rows: np.concatenate([run(batch) for batch in _batches(model, rows)])


def _described(specs: list[InputSpec]) -> str:
    return "; ".join(f"{s.name}: {s.dtype}[{', '.join(map(str, s.shape))}]" for s in specs)


def export_forms(model: Any, reference: pd.DataFrame, holdout: pd.DataFrame, cfg: DriftloopConfig, *,
                 version: str | None = None, clock: Callable[[], float] = time.perf_counter) -> ExportResult:
    """trainer.deployment.export_forms for an entrypoint model; never raises for a model that
    cannot be exported (``error`` says why)."""
    threshold = cfg.model.threshold
    model = model.cpu().eval()
    task = model.task
    manifest: dict[str, Any] = {"version": version, "model": cfg.model.name, "task": task, "classes": model.classes,
                                "entrypoint": model.spec, "opset": OPSET, "formats": {},
                                "inputs": f"{_described(input_specs(model))}: a batch of what the entrypoint's "
                                          "dataset(refs, train=False) yields, collated",
                                "output": OUTPUT_TEXT[task]}
    manifest.update(task_of(task).threshold_field(threshold))

    names = [s.name for s in input_specs(model)]

    def build() -> dict[str, bytes]:
        fp32 = _trace(model, _batches(model, reference.head(8))[0])
        return {"onnx": fp32, "onnx-int8": _int8(fp32, _batches(model, reference), names, task)}

    return check_forms(model, reference, holdout, cfg, ExportResult(manifest=manifest, task=task), build,
                       lambda data: _scorer(model, _session(data, names)), clock=clock, repeats=LATENCY_REPEATS)
