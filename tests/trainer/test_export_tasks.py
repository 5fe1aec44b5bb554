"""ONNX and INT8 export of multiclass and regression models (trainer/export.py, trainer/deployment.py,
monitor/onnx_scoring.py): the real trainer, exporter, quantizer and ONNX Runtime."""
from __future__ import annotations

import numpy as np
import onnx
import pandas as pd
import pytest

from monitor.onnx_scoring import OUTPUTS, OnnxScorer
from tests.trainer.task_data import CLASSES, ROWS, task_config
from trainer.build import build_model
from trainer.deployment import export_forms
from trainer.forms import Form, _refusal
from trainer.export import features_of, to_int8, to_onnx
from trainer.loop import LoopConfig
from trainer.pyfunc import TabularPyfunc
from trainer.runs import fit_frames

FIGURES = {"multiclass": {"accuracy", "roc_auc"}, "regression": {"mae", "rmse"}}


@pytest.fixture(scope="module", params=["multiclass", "regression"])
def trained(request, tmp_path_factory):
    """(config, a model of the task trained by the real loop); once per task for the module."""
    import torch
    task = request.param
    home = tmp_path_factory.mktemp(task)
    cfg = task_config(home / "home", task, model={"prediction": "served"})
    rows = ROWS[task](2000, seed=1)
    model = build_model(cfg, rows)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fit_frames(model, rows.iloc[:1600], rows.iloc[1600:], "label", LoopConfig.from_training(cfg.training),
                   checkpoint_path=home / "ckpt.pt", resume=False)
    finally:
        torch.set_num_threads(before)
    return cfg, model.eval()


def awkward(task: str, n: int = 300) -> pd.DataFrame:
    """Live-looking rows: missing numbers, missing and unseen categories, an index not starting at 0."""
    rows = ROWS[task](n, seed=7).drop(columns="label")
    rows.loc[rows.index[:20], "x0"] = np.nan
    rows.loc[rows.index[20:40], "region"] = None
    rows.loc[rows.index[40:60], "device"] = "never-seen"
    return rows.set_axis(rows.index + 1000)


def manifest(cfg, model) -> dict:
    return {"features": features_of(model), "task": model.task, "classes": model.classes,
            "prediction": cfg.model.prediction}


def scale(model, task: str) -> float:
    return float(model.target_std) if task == "regression" else 1.0


def test_onnx_serves_what_the_pyfunc_serves(trained):
    cfg, model = trained
    task, rows = model.task, awkward(model.task)
    scorer = OnnxScorer(to_onnx(model, rows), manifest(cfg, model))
    assert [o.name for o in scorer.session.get_outputs()] == [OUTPUTS[task]]
    expected = model.predict_proba(rows)
    got = scorer.predict_proba(rows)
    assert got.shape == expected.shape == ((len(rows), 5) if task == "multiclass" else (len(rows),))
    assert np.max(np.abs(got - expected)) / scale(model, task) < 1e-4
    assert np.max(np.abs(scorer.predict_proba(rows.head(1)) - expected[:1])) / scale(model, task) < 1e-4

    served = scorer.predict(rows)
    pyfunc = TabularPyfunc(model, cfg.model.prediction).predict(None, rows)
    assert list(served.columns) == list(pyfunc.columns) and served.index.equals(rows.index)
    if task == "multiclass":
        assert list(served.columns) == ["served", *(f"proba_{c}" for c in CLASSES)]
        assert (served["served"] == pyfunc["served"]).all() and set(served["served"]) <= set(CLASSES)
        assert np.allclose(served.iloc[:, 1:].sum(axis=1), 1.0, atol=1e-5)
    else:
        assert list(served.columns) == ["served"]
    numbers = [c for c in served.columns if c != "served" or task == "regression"]
    assert np.max(np.abs(served[numbers].to_numpy(float) - pyfunc[numbers].to_numpy(float))) / scale(model, task) < 1e-4
    joined = rows.join(served)   # what a service sends with log_predictions
    assert len(joined) == len(rows) and joined["served"].notna().all()


def test_both_forms_are_published_with_the_tasks_figures(trained):
    cfg, model = trained
    task = model.task
    reference, holdout = ROWS[task](1000, seed=2), ROWS[task](600, seed=3)
    result = export_forms(model, reference, holdout, cfg, version="4")
    assert result.error is None and result.task == task
    forms = {f["name"]: f for f in result.table()}
    assert list(forms) == ["torch", "onnx", "onnx-int8"]
    for form in forms.values():
        assert (FIGURES[task] <= set(form)
                and not (FIGURES["multiclass"] | FIGURES["regression"]) - FIGURES[task] & set(form))
        assert form["published"] and form["reason"] == ""
    assert forms["onnx"]["parity"] < 1e-4 and forms["onnx-int8"]["parity"] < 0.05
    torch_form, int8 = result.forms["torch"], result.forms["onnx-int8"]
    if task == "regression":
        assert int8.mae <= torch_form.mae / 0.98 and torch_form.mae < 0.2 * holdout["label"].std()
        assert result.target_scale == pytest.approx(reference["label"].std(ddof=0))
    else:
        assert int8.accuracy >= 0.98 * torch_form.accuracy and torch_form.accuracy > 0.7 and torch_form.roc_auc > 0.9
        assert result.target_scale is None
    assert result.manifest["task"] == task and result.manifest["classes"] == model.classes
    assert result.manifest["prediction"] == "served" and "threshold" not in result.manifest
    assert (set(result.manifest["formats"]) == {"onnx", "onnx-int8"}
            and set(result.files) == {"model.onnx", "model.int8.onnx"})

    scorer = OnnxScorer(result.files["model.int8.onnx"], result.manifest)
    ops = {node.op_type for node in onnx.load_from_string(result.files["model.int8.onnx"]).graph.node}
    assert "QuantizeLinear" in ops                       # really quantized
    alone = np.array([scorer.predict_proba(holdout.iloc[i:i + 1])[0] for i in range(30)])
    assert np.array_equal(alone, scorer.predict_proba(holdout.head(30)))  # static ranges: batch-independent


def test_a_form_outside_tolerance_is_refused(trained):
    cfg, model = trained
    strict = task_config(cfg.home, model.task, model={"prediction": "served"},
                         training={"export": {"int8_parity_tolerance": 1e-6}})
    result = export_forms(model, ROWS[model.task](400, seed=2), ROWS[model.task](400, seed=3), strict)
    assert result.published("onnx") is not None and result.published("onnx-int8") is None
    assert result.forms["onnx-int8"].reason.startswith("parity") and set(result.files) == {"model.onnx"}
    assert result.deployed()["form"] == "onnx"


def test_the_kept_figure_rule_per_task():
    latency = {"p50_1": 0.1, "p99_1": 0.2, "p50_1024": 1.0, "p99_1024": 2.0}
    reference = Form("torch", 1, 0.0, None, None, latency, mae=1.0, rmse=1.5)
    for mae, refused in ((1.02, False), (1.03, True)):   # MAE at most 1/0.98 = 1.0204 x PyTorch's
        form = Form("onnx-int8", 1, 0.01, None, None, latency, mae=mae, rmse=1.5)
        assert bool(_refusal("regression", form, reference, 0.05, 0.98)) is refused
    reference = Form("torch", 1, 0.0, 0.80, 0.9, latency)
    for accuracy, refused in ((0.79, False), (0.78, True)):  # accuracy at least 0.98 x 0.80 = 0.784
        form = Form("onnx-int8", 1, 0.01, accuracy, 0.9, latency)
        assert bool(_refusal("multiclass", form, reference, 0.05, 0.98)) is refused
    assert _refusal("multiclass", Form("onnx", 1, float("nan"), 0.8, 0.9, latency), reference, 1e-4, 0.98)


def test_int8_keeps_the_output_layer_fp32_for_the_other_tasks(trained):
    cfg, model = trained
    rows = ROWS[model.task](300, seed=4)
    fp32 = to_onnx(model, rows)
    gemms = [n.name for n in onnx.load_from_string(fp32).graph.node if n.op_type in ("Gemm", "MatMul")]
    assert len(gemms) == 3   # input layer, hidden layer, output layer
    quantized = onnx.load_from_string(to_int8(fp32, rows, features_of(model), model.task)).graph.node
    weights_quantized = {n.name for n in quantized if n.op_type in ("Gemm", "MatMul")
                         and any("DequantizeLinear" in i for i in n.input[1:2])}
    assert gemms[0] not in weights_quantized and gemms[-1] not in weights_quantized
    assert weights_quantized == set(gemms[1:-1])
