"""A trained model as ONNX: fp32 (``model.onnx``) and INT8 (``model.int8.onnx``), preprocessing inside.

The PyTorch part (standardising, imputing NaN, missing indicators, the network, and the model's
``output``: the sigmoid (binary), the softmax (multiclass, ``[batch, K]`` in the order of
``classes``) or the target's unscaling (regression, the value in the target's units)) is traced by ``torch.onnx.export``
with opset :data:`OPSET` and a dynamic batch axis. We use the
TorchScript exporter (``dynamo=False``): it takes well under a second for these models where
the dynamo exporter takes seconds, and every registration pays for it. The vocabulary lookup,
which PyTorch does in Python (``TabularModel.encode``), is prepended as ONNX-ML ``LabelEncoder``
nodes, so the graph takes the raw features, one 1-D input per feature (``[batch, dim]`` float32 for an
embedding feature, NaN rows where missing), and its one output is
named by the task (:data:`monitor.onnx_scoring.OUTPUTS`; monitor/onnx_scoring.py).

INT8 is ONNX Runtime's *static* quantization (QDQ; int8 per-channel weights, uint8 activations),
calibrated on the reference rows the model was registered with. Static rather than dynamic: with
dynamic quantization each batch's activation range is measured at run time, so a row's score
depends on the other rows it is batched with (scored alone, or among 1023 others, it differs);
static ranges are fixed in the file, so a row always gets the same score, and they come from
rows that look like live traffic. Speed and size are about the same for both on these models
(bench/bench_export.py prints both). Embedding tables stay fp32 (a Gather is a copy, not
arithmetic), and so does the input layer (see :func:`_first_matmul`) and, for a multiclass or
regression model, the output layer (:func:`_last_matmul`); the other Gemms and MatMuls are quantized.
"""
from __future__ import annotations

import io
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from monitor import tasks
from monitor.errors import ExportError
from monitor.onnx_scoring import OUTPUTS, feeds
from monitor.tasks import Task

OPSET = 17   # pinned: what the exporter emits and ONNX Runtime 1.x runs everywhere
ML_OPSET = 3  # ai.onnx.ml, for LabelEncoder
_PREFIX = "driftloop/"


def features_of(model: Any) -> list[dict[str, Any]]:
    return ([{"name": n, "type": "numeric"} for n in model.numeric]
            + [{"name": n, "type": "categorical"} for n in model.categorical]
            + [{"name": n, "type": "embedding", "dim": d} for n, d in _embeddings(model).items()])


def _embeddings(model: Any) -> dict[str, int]:
    return dict(getattr(model, "embeddings", None) or {})  # none on models pickled before them


def task_of(model: Any) -> Task:
    """The model's task; a model pickled before tasks existed is binary."""
    return tasks.task_of(getattr(model, "task", "binary"))


def _scoring_module(model: Any) -> Any:
    """``(x_num, x_cat) -> served output`` (``model.output`` of the raw output) around the model,
    with an empty block made inside the graph when the model has no numeric or no categorical
    features (no zero-width inputs)."""
    import torch

    has_num, has_cat = bool(model.numeric or _embeddings(model)), bool(model.categorical)
    output = getattr(model, "output", torch.sigmoid)  # a model from before tasks: binary

    class Scoring(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            x_num = inputs[0] if has_num else torch.zeros((inputs[0].shape[0], 0), dtype=torch.float32)
            x_cat = inputs[-1] if has_cat else torch.zeros((inputs[0].shape[0], 0), dtype=torch.int64)
            return output(self.model(x_num, x_cat))

    return Scoring().eval()


def _traced(model: Any, sample: pd.DataFrame) -> Any:
    """The PyTorch part as an onnx.ModelProto with inputs ``x_num`` / ``x_cat`` and the task's output."""
    import onnx
    import torch

    x_num, x_cat = model.encode(sample)
    has_num = bool(model.numeric or _embeddings(model))
    names = (["x_num"] if has_num else []) + (["x_cat"] if model.categorical else [])
    args = tuple(t for t, keep in ((x_num, has_num), (x_cat, model.categorical)) if keep)
    output = OUTPUTS[task_of(model)]
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice, on every call
        torch.onnx.export(_scoring_module(model), args, buffer,  # type: ignore[arg-type]  # file-like works
                          input_names=names, output_names=[output],
                          dynamic_axes={**{n: {0: "batch"} for n in names}, output: {0: "batch"}},
                          opset_version=OPSET, dynamo=False)
    return onnx.load_from_string(buffer.getvalue())


def to_onnx(model: Any, sample: pd.DataFrame) -> bytes:
    """The fp32 ONNX model of ``model`` (a TabularModel, in eval mode) taking raw features.
    ``sample``: a few rows of raw features to trace with. ExportError when it cannot be built."""
    import onnx
    from onnx import TensorProto, helper

    model = model.cpu().eval()
    try:
        graph_model = _traced(model, sample.head(8))
    except Exception as exc:  # the exporter raises anything from TypeError to its own errors
        raise ExportError(f"torch.onnx.export failed: {type(exc).__name__}: {str(exc)[:300]}") from exc
    graph = graph_model.graph
    taken = {t for node in graph.node for t in (*node.input, *node.output)} | {i.name for i in graph.initializer}
    clash = [f["name"] for f in features_of(model) if f["name"] in taken or f["name"].startswith(_PREFIX)]
    if clash:
        raise ExportError(f"feature name(s) {', '.join(clash)} clash with tensor names inside the graph")

    nodes, inputs = [], []
    axis = helper.make_tensor(_PREFIX + "axis1", TensorProto.INT64, [1], [1])
    for block, columns, kind in (("x_num", model.numeric, TensorProto.FLOAT), ("x_cat", model.categorical, None)):
        parts = []
        for name in columns:
            if kind is None:  # categorical: text -> vocabulary index (unknown: 0), as TabularModel.encode
                vocab = model.vocab[name]
                inputs.append(helper.make_tensor_value_info(name, TensorProto.STRING, ["batch"]))
                coded = f"{_PREFIX}{name}/index"
                nodes.append(helper.make_node("LabelEncoder", [name], [coded], domain="ai.onnx.ml",
                                              keys_strings=list(vocab), values_int64s=list(range(1, len(vocab) + 1)),
                                              default_int64=0))
                source = coded
            else:
                inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch"]))
                source = name
            parts.append(f"{_PREFIX}{name}/column")
            nodes.append(helper.make_node("Unsqueeze", [source, axis.name], [parts[-1]]))
        if kind is not None:  # each embedding's components follow the numeric features (TabularModel.encode)
            for name, dim in _embeddings(model).items():
                inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", dim]))
                parts.append(name)
        if parts:
            nodes.append(helper.make_node("Concat", parts, [block], axis=1))
    graph.initializer.append(axis)
    del graph.input[:]
    graph.input.extend(inputs)
    new_nodes = nodes + list(graph.node)
    del graph.node[:]
    graph.node.extend(new_nodes)
    if model.categorical:
        graph_model.opset_import.append(helper.make_opsetid("ai.onnx.ml", ML_OPSET))
    graph_model.producer_name = "driftloop"
    try:
        onnx.checker.check_model(graph_model, full_check=True)
    except Exception as exc:
        raise ExportError(f"the exported graph is invalid: {str(exc)[:300]}") from exc
    return graph_model.SerializeToString()


_MATMULS = ("Gemm", "MatMul")


def _first_matmul(data: bytes) -> list[str]:
    """The input layer's node: it mixes standardised numbers with embeddings, the widest range of
    any activation, and quantizing it costs most of the INT8 error (max |Δ score| 0.06 -> 0.02 on
    the default MLP); it is also the smallest weight matrix, so keeping it fp32 costs little size."""
    import onnx
    for node in onnx.load_from_string(data).graph.node:  # graph order is topological
        if node.op_type in _MATMULS:
            return [node.name]
    return []


def _matmuls(data: bytes) -> list[str]:
    """The names of the MatMul and Gemm nodes, in graph order."""
    import onnx
    return [node.name for node in onnx.load_from_string(data).graph.node if node.op_type in _MATMULS]


def _last_matmul(data: bytes) -> list[str]:
    """The output layer's node. A multiclass or regression model keeps it fp32 too: its output is
    the served output itself (the logits before a softmax, the value before unscaling), with no
    sigmoid to flatten rounding at the extremes, and it is the smallest matrix after the first.
    On the default MLP (64x32), five seeds of the tests' data, 1000 reference rows: regression max
    |Δ value| / target std 0.020-0.025 -> 0.013-0.019, multiclass max |Δ probability| 0.024-0.034
    -> 0.016-0.019, against the default tolerance 0.05. (Narrower nets do worse: 32x16 reached
    0.066 on one seed of five.)"""
    return _matmuls(data)[-1:]


def _excluded(data: bytes, task: str) -> list[str]:
    """The nodes an INT8 form keeps fp32: the input layer's, and the output layer's where the task says
    (:meth:`monitor.tasks.Task.int8_fp32_outputs`: a multiclass or regression model's, :func:`_last_matmul`)."""
    return list(dict.fromkeys(_first_matmul(data) + tasks.task_of(task).int8_fp32_outputs(_matmuls(data))))


def to_int8(fp32: bytes, calibration: pd.DataFrame, features: list[dict[str, Any]], task: str = "binary") -> bytes:
    """Static INT8 quantization (QDQ, per-channel weights) of an exported model, activation ranges
    calibrated on ``calibration`` (raw feature rows: the reference sample). Left fp32: the input
    layer and, for a multiclass or regression model, the output layer (:func:`_last_matmul`)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Rows(CalibrationDataReader):
        def __init__(self) -> None:
            size = 256
            self._batches = iter([feeds(calibration.iloc[i:i + size], features)
                                  for i in range(0, len(calibration), size)])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._batches, None)

    with tempfile.TemporaryDirectory() as tmp:
        source, target = Path(tmp) / "model.onnx", Path(tmp) / "model.int8.onnx"
        source.write_bytes(fp32)
        try:
            quantize_static(str(source), str(target), Rows(), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                            op_types_to_quantize=list(_MATMULS), nodes_to_exclude=_excluded(fp32, task))
        except Exception as exc:
            raise ExportError(f"INT8 quantization failed: {type(exc).__name__}: {str(exc)[:300]}") from exc
        return target.read_bytes()
