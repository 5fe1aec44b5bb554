"""training.entrypoint: a user's own PyTorch model and Dataset (tests/trainer/entry_digits.py, a tiny
CNN on sklearn's digits saved as .npy files) trained by driftloop's loop, registered in a real
MLflow SQLite store, served by its pyfunc from input_uri, retrained from the champion, exported."""
from __future__ import annotations

from pathlib import Path

import mlflow.pyfunc
import numpy as np
import pytest
import torch

from monitor.errors import ConfigError, DataError
from tests.trainer.conftest import make_config
from tests.trainer.entry_digits import FIRST_TRAINING_WEIGHTS, write_digits
from trainer import registry as reg
from trainer.entrypoint import build_entrypoint_model, checked_rows, load_entrypoint
from trainer.loop import LoopConfig, TrainingInterrupted, fit

CLASSES = [str(i) for i in range(10)]
SPEC = "tests.trainer.entry_digits:Digits"


def digits_config(home, template=None, spec=SPEC, **training):
    return make_config(home, template, model={
        "task": "multiclass", "classes": CLASSES, "target": "label",
        "features": [{"name": "cnn", "type": "embedding", "dim": 16}],
        "input_roots": [str(home.parent)]},  # the tests' images: beside home (tmp_path / "img")
        training={"entrypoint": spec, "epochs": 8, "learning_rate": 0.01, "batch_size": 32, "patience": 3,
                  "export": {"onnx": False}, "try_previous_versions": 0, "reference_sample": 300, **training})


@pytest.mark.parametrize("spec, words", [
    ("no_colon", "must look like"),
    ("tests.trainer.no_such_module:Digits", "cannot import"),
    ("tests.trainer.entry_digits:Nope", "has no attribute 'Nope'"),
    ("tests.trainer.entry_digits:NoDataset", "lacks the required method(s) dataset"),
])
def test_loading_errors_name_the_spec(spec, words):
    with pytest.raises(ConfigError) as err:
        load_entrypoint(spec)
    assert spec in str(err.value) and words in str(err.value)


def test_a_module_in_the_working_directory_loads_like_uvicorn_apps(tmp_path, monkeypatch):
    """The `driftloop` console script's path does not hold the user's project: the working
    directory is searched too; a module the user's code imports that is missing is said as such."""
    import sys
    (tmp_path / "my_project_entry.py").write_text(
        "class Model:\n    def build_model(self, task, n_outputs): ...\n    def dataset(self, refs, train): ...\n")
    (tmp_path / "my_broken_entry.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert type(load_entrypoint("my_project_entry:Model")).__name__ == "Model"
    with pytest.raises(ConfigError, match="no_such_dependency_xyz"):
        load_entrypoint("my_broken_entry:Model")


def test_build_model_must_return_a_module(tmp_path):
    spec = "tests.trainer.entry_digits:NotAModule"
    cfg = digits_config(tmp_path / "home", spec=spec)
    with pytest.raises(ConfigError, match="returned str, expected a torch.nn.Module"):
        build_entrypoint_model(cfg, write_digits(tmp_path / "img", count=20))


def test_rows_need_an_input_uri_or_an_id(tmp_path):
    cfg = digits_config(tmp_path / "home")
    rows = write_digits(tmp_path / "img", count=30)
    rows.loc[[3, 7], "input_uri"] = None
    with_ids = checked_rows(cfg, rows, what="training data")  # the id stands in for a missing uri
    assert with_ids["input_uri"].iloc[3] == rows["id"].iloc[3]
    with pytest.raises(DataError, match="2 row.s. have neither 'input_uri' nor an id .*first at row 3"):
        checked_rows(cfg, rows.drop(columns=["id"]), what="training data")


@pytest.fixture(scope="module")
def trained(tmp_path_factory, mlflow_template):
    """A champion (v1) trained through the entrypoint on 700 digits, then a retrain on 600 digits
    turned a quarter (a new input distribution the champion cannot read)."""
    from trainer import retrain, train_baseline
    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("entry")
    cfg = digits_config(tmp / "home", mlflow_template, cold_start="never", retrain_epochs=8)
    upright = write_digits(tmp / "img", count=700)
    outcome = train_baseline(cfg, upright.drop(columns=["id"]))
    champion = reg.load_champion(cfg)
    champion_weights = {k: v.clone() for k, v in champion.model.state_dict().items()}
    before = len(FIRST_TRAINING_WEIGHTS)
    turned = write_digits(tmp / "img", rotate=1, start=700, count=600, seed=1)
    result = retrain(cfg, turned)
    return cfg, upright, turned, outcome, champion_weights, FIRST_TRAINING_WEIGHTS[before:], result


def test_baseline_champion_serves_from_input_uri(trained):
    cfg, upright, _, outcome, _, _, _ = trained
    assert outcome.champion and outcome.metrics["accuracy"] > 0.5
    with reg.session(cfg):
        registry = reg.Registry(cfg)
        model = mlflow.pyfunc.load_model(registry.client.get_model_version_download_uri(registry.name, "1"))
        params = registry.client.get_run(outcome.run_id).data.params
    out = model.predict(upright[["input_uri"]].head(50))
    assert params["entrypoint"] == SPEC
    assert list(out.columns[:2]) == ["prediction", "proba_0"] and len(out) == 50
    np.testing.assert_allclose(out[[f"proba_{c}" for c in CLASSES]].sum(axis=1), 1.0, atol=1e-5)
    assert (out["prediction"] == upright["label"].head(50)).mean() > 0.5
    assert all(len(v) == 16 for v in out["cnn"])  # embed() output as a list column named after the feature
    reference = reg.load_champion(cfg).baseline.reference
    assert reference["input_uri"].str.endswith(".npy").all()
    assert reference["cnn"].map(len).eq(16).all()  # computed by the champion: the file had none


def test_retrain_fine_tunes_the_champion_and_promotes(trained):
    _, _, _, _, champion_weights, first_forwards, result = trained
    start = first_forwards[0]  # the warm start's first training step saw the champion's weights
    assert all(torch.equal(start[k], champion_weights[f"net.{k}"]) for k in start)
    assert result.outcome == "promoted", result.reasons
    assert result.metrics["challenger_accuracy"] > result.metrics["champion_accuracy"] + 0.2


def loop_job(tmp_path, rows=240, **loop):
    cfg = digits_config(tmp_path / "home")
    frame = checked_rows(cfg, write_digits(tmp_path / "img", count=rows), what="rows")
    fit_rows, val_rows = frame.iloc[: rows * 3 // 4], frame.iloc[rows * 3 // 4:]
    model = build_entrypoint_model(cfg, fit_rows, seed=5)
    settings = LoopConfig(**{"epochs": 3, "batch_size": 32, "grad_accum_steps": 2, "learning_rate": 0.01,
                             "patience": 10, "seed": 3, "progress": False, "checkpoint_every_minutes": 60.0, **loop})
    return model, model.training_data(fit_rows, "label", True), model.training_data(val_rows, "label", False), settings


def test_resume_through_the_dataset_is_bitwise_identical(tmp_path):
    torch.set_num_threads(1)
    reference, train, val, settings = loop_job(tmp_path)
    expected = fit(reference, train, val, settings)
    ckpt = tmp_path / "ckpt.pt"
    model, train, val, _ = loop_job(tmp_path)
    with pytest.raises(TrainingInterrupted):
        fit(model, train, val, settings, checkpoint_path=ckpt, should_stop=lambda s: s.step == 5)  # mid-epoch 2
    resumed, train, val, _ = loop_job(tmp_path)
    result = fit(resumed, train, val, settings, checkpoint_path=ckpt, resume=True)
    assert result.history == expected.history
    a, b = reference.state_dict(), resumed.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_grad_accumulation_and_bf16_autocast_on_cpu(tmp_path):
    model, train, val, settings = loop_job(tmp_path, amp="bf16", grad_accum_steps=3, epochs=2)
    result = fit(model, train, val, settings)
    assert result.epochs_run == 2 and all(np.isfinite(r["val_loss"]) for r in result.history)
    assert result.steps == 2 * int(np.ceil(np.ceil(len(train) / 32) / 3))


@pytest.mark.parametrize("spec, published", [(SPEC, True), ("tests.trainer.entry_digits:BranchyDigits", False)])
def test_export_where_the_model_traces_refused_with_the_reason_where_not(tmp_path, spec, published):
    from trainer.deployment import export_forms
    cfg = digits_config(tmp_path / "home", spec=spec)
    frame = checked_rows(cfg, write_digits(tmp_path / "img", count=200), what="rows")
    model = build_entrypoint_model(cfg, frame)
    fit(model, model.training_data(frame, "label", True), model.training_data(frame, "label", False),
        LoopConfig(epochs=2, batch_size=32, progress=False))
    result = export_forms(model, frame.iloc[:120], frame.iloc[120:], cfg)
    if published:
        assert result.error is None and result.published("onnx") is not None
        assert result.forms["onnx"].parity < 1e-4
    else:
        assert "does not trace" in (result.error or "") and "onnx" not in result.forms


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with a driver")
def test_entrypoint_trains_with_fp16_autocast_on_cuda(tmp_path):
    model, train, val, settings = loop_job(tmp_path, amp="fp16", device="cuda", epochs=2)
    result = fit(model, train, val, settings)
    assert result.epochs_run == 2 and all(np.isfinite(r["val_loss"]) for r in result.history)
    assert next(model.parameters()).device.type == "cuda"


def test_a_retrain_skips_and_counts_rows_whose_input_left_the_roots(trained, tmp_path):
    """A file replaced by a symlink out of the root after ingest, one deleted and one corrupted:
    the retrain's window loses those rows (counted by kind), reads none of them, and prepares."""
    from trainer.inputs import Skip, readable_rows
    from trainer.retraining import prepare
    cfg, _, turned, _, _, _, _ = trained
    window = turned.copy()
    secret = tmp_path / "secret.npy"  # outside the roots (tmp_path is not the fixture's folder)
    secret.write_bytes(b"not for clients")
    swapped, deleted, corrupt = (Path(window["input_uri"].iloc[i]) for i in (0, 1, 2))
    swapped.unlink()
    swapped.symlink_to(secret)
    deleted.unlink()
    corrupt.write_bytes(b"not an array")
    window.loc[3, "input_uri"] = "/etc/passwd"  # as if stored before the roots were set
    found = readable_rows(cfg, window, what="window")
    assert found.skipped == {Skip.REFUSED: 2, Skip.UNREADABLE: 2}
    assert len(found.rows) == len(window) - 4 and not found.rows["input_uri"].isin([str(secret)]).any()
    p = prepare(cfg, window)
    # The promoted champion's reference holds turned rows too: those count as well.
    reference = readable_rows(cfg, reg.load_champion(cfg).baseline.reference, what="reference").counts()
    assert p.skipped_inputs == {"refused": 2 + reference["refused"], "unreadable": 2 + reference["unreadable"]}
    assert len(p.recent) == len(window) - 4
