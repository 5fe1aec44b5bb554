"""ONNX and INT8 export (trainer/export.py, trainer/deployment.py) against the real PyTorch model,
the real exporter and quantizer, and ONNX Runtime; registration through a real MLflow store."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pandas as pd
import pytest

from monitor.errors import ExportError
from monitor.onnx_scoring import OnnxScorer
from tests.trainer.conftest import make_config
from trainer.build import build_model
from trainer.deployment import export_forms
from trainer.export import features_of, to_int8, to_onnx
from trainer.loop import LoopConfig
from trainer.metrics import accuracy
from trainer.runs import fit_frames
from trainer.synthetic import make_dataset

FP32_TOLERANCE, INT8_TOLERANCE = 1e-4, 0.05  # the defaults of training.export.parity_tolerance / int8_...


def trained(cfg, rows: pd.DataFrame, tmp_path):
    model = build_model(cfg, rows)
    fit_frames(model, rows.iloc[:1200], rows.iloc[1200:1500], cfg.model.target, LoopConfig.from_training(cfg.training),
               checkpoint_path=tmp_path / "ckpt.pt", resume=False)
    return model.eval()


@pytest.fixture
def mlp(tcfg, tmp_path):
    return trained(tcfg, make_dataset(2000, seed=1), tmp_path)


def awkward_rows(n: int = 400) -> pd.DataFrame:
    """Live-looking rows with what a service meets: missing numbers, missing, unseen and integer-coded categories."""
    rows = make_dataset(n, seed=7).drop(columns="label")
    rows.loc[rows.index[:20], "x0"] = np.nan
    rows.loc[rows.index[20:40], "region"] = None
    rows.loc[rows.index[40:60], "device"] = "never-seen"
    return rows


def test_onnx_scores_raw_features_like_pytorch_at_any_batch_size(mlp):
    rows = awkward_rows()
    scorer = OnnxScorer(to_onnx(mlp, rows), {"features": features_of(mlp)})
    expected = mlp.predict_proba(rows)
    assert np.max(np.abs(scorer.predict(rows) - expected)) < FP32_TOLERANCE
    assert np.max(np.abs(scorer.predict(rows.head(1)) - expected[:1])) < FP32_TOLERANCE  # dynamic batch axis
    typed = rows.astype({"region": "category", "x3": "Float64"}).assign(x4=rows["x4"].round().astype("Int64"))
    assert np.max(np.abs(scorer.predict(typed) - mlp.predict_proba(typed))) < FP32_TOLERANCE  # pandas' other dtypes
    inputs = {i.name: i.type for i in scorer.session.get_inputs()}
    assert inputs == {**{n: "tensor(float)" for n in mlp.numeric}, **{n: "tensor(string)" for n in mlp.categorical}}


@pytest.mark.parametrize("column, value, message", [
    ("x1", "abc", "feature 'x1' must be numeric; row 3 holds 'abc'"),
    ("x2", float("inf"), "feature 'x2' has 1 infinite value(s)"),
])
def test_both_runtimes_refuse_the_same_bad_rows_with_the_same_message(mlp, column, value, message):
    rows = make_dataset(10, seed=8).astype({column: object})
    rows.loc[3, column] = value
    scorer = OnnxScorer(to_onnx(mlp, make_dataset(10, seed=8)), {"features": features_of(mlp)})
    for score in (mlp.predict_proba, scorer.predict):
        with pytest.raises(ValueError) as info:
            score(rows)
        assert str(info.value) == message
    with pytest.raises(ValueError, match="missing feature columns: region"):
        scorer.predict(rows.drop(columns="region"))


def test_int8_stays_within_tolerance_and_keeps_accuracy(mlp):
    reference, holdout = make_dataset(1000, seed=2), make_dataset(1000, seed=3)
    fp32 = to_onnx(mlp, reference)
    data = to_int8(fp32, reference, features_of(mlp))
    int8 = OnnxScorer(data, {"features": features_of(mlp)})
    assert np.max(np.abs(int8.predict(reference) - mlp.predict_proba(reference))) < INT8_TOLERANCE
    torch_acc = accuracy(holdout["label"], mlp.predict_proba(holdout))
    assert accuracy(holdout["label"], int8.predict(holdout)) >= 0.98 * torch_acc
    alone = np.array([int8.predict(holdout.iloc[i:i + 1])[0] for i in range(50)])
    assert np.array_equal(alone, int8.predict(holdout.head(50)))  # static ranges: a row's score ignores its batch
    ops = {node.op_type for node in onnx.load_from_string(data).graph.node}
    assert "QuantizeLinear" in ops and "DequantizeLinear" in ops  # really quantized, not a copy


def test_a_factory_network_exports_too(tmp_path, mlflow_template):
    cfg = make_config(tmp_path / "home", mlflow_template, model={"factory": "tests.trainer.user_nets:build"})
    model = trained(cfg, make_dataset(2000, seed=1), tmp_path)
    rows = awkward_rows()
    scorer = OnnxScorer(to_onnx(model, rows), {"features": features_of(model)})
    assert np.max(np.abs(scorer.predict(rows) - model.predict_proba(rows))) < FP32_TOLERANCE


def test_a_network_the_tracer_freezes_wrongly_is_refused_not_published(tmp_path, mlflow_template):
    """A data-dependent branch is traced for the sample's path only: the graph then disagrees with
    PyTorch on rows that take the other path, and the parity check must catch it."""
    cfg = make_config(tmp_path / "home", mlflow_template, model={"factory": "tests.trainer.broken_nets:branchy"})
    model = trained(cfg, make_dataset(2000, seed=1), tmp_path)
    reference, holdout = make_dataset(600, seed=2), make_dataset(600, seed=3)
    result = export_forms(model, reference, holdout, cfg)
    assert result.error is None
    for name in ("onnx", "onnx-int8"):
        assert not result.forms[name].published
        assert "parity" in result.forms[name].reason and "exceeds tolerance" in result.forms[name].reason
    assert result.files == {} and result.manifest["formats"] == {} and result.deployed() is None


def test_a_network_that_cannot_be_traced_is_an_export_error(tmp_path, mlflow_template):
    cfg = make_config(tmp_path / "home", mlflow_template, model={"factory": "tests.trainer.broken_nets:untraceable"})
    model = trained(cfg, make_dataset(2000, seed=1), tmp_path)
    with pytest.raises(ExportError, match="torch.onnx.export failed"):
        to_onnx(model, make_dataset(10, seed=2))
    result = export_forms(model, make_dataset(300, seed=2), make_dataset(300, seed=3), cfg)
    assert "torch.onnx.export failed" in result.error and result.files == {}


def test_registration_publishes_both_forms_with_their_table(tcfg, champion, tmp_path):
    from mlflow import MlflowClient
    client = MlflowClient(tcfg.tracking_uri)
    run = client.get_run(champion.run_id)
    assert run.data.tags["driftloop.export.onnx"] == "published"
    assert run.data.tags["driftloop.export.onnx-int8"] == "published"
    names = {a.path for a in client.list_artifacts(champion.run_id, "onnx")}
    assert names == {"onnx/model.onnx", "onnx/model.int8.onnx", "onnx/manifest.json", "onnx/export.json"}
    local = client.download_artifacts(champion.run_id, "onnx", str(tmp_path))
    table = json.loads((tmp_path / "onnx" / "export.json").read_text())["forms"]
    assert [f["name"] for f in table] == ["torch", "onnx", "onnx-int8"]
    for form in table:
        assert form["size_bytes"] > 0 and 0.5 < form["accuracy"] <= 1.0
        assert 0 < form["latency_ms"]["p50_1"] <= form["latency_ms"]["p99_1"]
    manifest = json.loads((tmp_path / "onnx" / "manifest.json").read_text())
    assert manifest["version"] == champion.version and manifest["threshold"] == tcfg.model.threshold
    assert [f["name"] for f in manifest["features"]] == tcfg.model.feature_names
    rows = make_dataset(50, seed=9)
    served = OnnxScorer.from_dir(local, "onnx").predict(rows)
    from trainer.registry import load_champion
    assert np.max(np.abs(served - load_champion(tcfg).predict_proba(rows))) < FP32_TOLERANCE


def test_a_failed_export_does_not_fail_the_training(tmp_path, mlflow_template):
    from mlflow import MlflowClient

    from trainer import train_baseline
    cfg = make_config(tmp_path / "home", mlflow_template, model={"factory": "tests.trainer.broken_nets:untraceable"})
    out = train_baseline(cfg, make_dataset(1500, seed=1))
    assert out.champion and out.version == "1"
    tags = MlflowClient(cfg.tracking_uri).get_run(out.run_id).data.tags
    assert "torch.onnx.export failed" in tags["driftloop.export.error"]
    assert "driftloop.export.onnx" not in tags
