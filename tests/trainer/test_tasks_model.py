"""The model and the training loop per task (trainer/model.py, trainer/loop.py): outputs, losses,
class weights, bit-identical resume, and the pyfunc's output columns."""
from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
import torch

from monitor.config import load_config
from monitor.tasks import proba_column
from tests.trainer.task_data import CLASSES, multiclass_rows, regression_rows
from trainer.build import build_model
from trainer.data import check_frame, split, tensors
from trainer.loop import LoopConfig, TrainingInterrupted, class_weights, fit
from trainer.pyfunc import TabularPyfunc, output_proba_column
from trainer.synthetic import make_dataset

LOOP = LoopConfig(epochs=6, batch_size=32, learning_rate=5e-3, patience=50, seed=3, progress=False,
                  checkpoint_every_minutes=60.0)


def cfg_for(task: str):
    model = {"task": task, **({"classes": CLASSES} if task == "multiclass" else {})}
    return load_config(path=None, environ={}, overrides={"model": model, "training": {"hidden": [16], "dropout": 0.0}})


def job(task: str, rows: int = 500):
    cfg = cfg_for(task)
    data = multiclass_rows(rows, seed=0) if task == "multiclass" else regression_rows(rows, seed=0)
    clean = check_frame(data.assign(label=np.asarray(CLASSES, dtype=object)[data["label"]])
                        if task == "multiclass" else data, cfg.model)
    fit_rows, val_rows = split(clean, 0.25, "label", seed=0, task=task)
    model = build_model(cfg, fit_rows, seed=11)
    return model, tensors(model, fit_rows, "label"), tensors(model, val_rows, "label"), val_rows


def test_outputs_per_task():
    model, *_ = job("multiclass", 100)
    proba = model.predict_proba(multiclass_rows(7, seed=1))
    assert proba.shape == (7, 5) and np.allclose(proba.sum(axis=1), 1.0)
    raw = model(*model.encode(multiclass_rows(7, seed=1)))
    assert raw.shape == (7, 5)
    np.testing.assert_allclose(model.output(raw).detach().numpy(), proba, rtol=1e-5)
    assert model.predict_proba(multiclass_rows(3, seed=1).head(0)).shape == (0, 5)
    reg, *_ = job("regression", 100)
    raw = reg(*reg.encode(regression_rows(4, seed=1)))
    assert raw.shape == (4,)
    expected = raw.detach().numpy() * float(reg.target_std) + float(reg.target_mean)
    np.testing.assert_allclose(reg.predict_proba(regression_rows(4, seed=1)), expected, rtol=1e-5)


def test_a_model_pickled_before_tasks_is_binary():
    cfg = load_config(path=None, environ={}, overrides={})
    model = build_model(cfg, make_dataset(100, seed=0))
    for name in ("task", "_class_names"):
        del model.__dict__[name]
    old = pickle.loads(pickle.dumps(model))
    assert old.task == "binary" and old.classes is None
    out = TabularPyfunc(old).predict(None, make_dataset(5, seed=1))
    assert isinstance(out, np.ndarray) and out.shape == (5,)


def test_class_weights_are_inverse_frequency_clipped():
    y = torch.tensor([0] * 90 + [1] * 9 + [2] * 1)
    w = class_weights(y, 4)
    assert w[0].item() == pytest.approx(100 / (4 * 90))
    assert w[1].item() == pytest.approx(100 / (4 * 9))
    assert w[2].item() == pytest.approx(10.0)  # 25, clipped
    assert w[3].item() == pytest.approx(1.0)   # absent: no rows to weigh
    assert torch.allclose(class_weights(torch.arange(5).repeat(20), 5), torch.ones(5))


@pytest.mark.parametrize("task", ["multiclass", "regression"])
def test_each_task_learns_and_resumes_bit_identically(tmp_path, task):
    torch.set_num_threads(1)
    model, train, val, val_rows = job(task)
    before = model.predict_proba(val_rows)
    result = fit(model, train, val, LOOP)
    assert result.history[-1]["val_loss"] < result.history[0]["val_loss"]
    after = model.predict_proba(val_rows)
    y = val_rows["label"].to_numpy()
    if task == "multiclass":
        assert set(result.history[0]) >= {"val_accuracy", "val_roc_auc"}
        assert (after.argmax(1) == y).mean() > max((before.argmax(1) == y).mean() + 0.3, 0.6)
    else:
        assert set(result.history[0]) >= {"val_mae", "val_rmse"}
        assert np.abs(after - y).mean() < 0.5 * np.abs(before - y).mean()

    ckpt = tmp_path / "ckpt.pt"
    resumed, train, val, _ = job(task)
    with pytest.raises(TrainingInterrupted):
        fit(resumed, train, val, LOOP, checkpoint_path=ckpt, should_stop=lambda s: s.step == 20)
    resumed, train, val, _ = job(task)
    again = fit(resumed, train, val, LOOP, checkpoint_path=ckpt, resume=True)
    assert again.history == result.history
    for key, tensor in model.state_dict().items():
        assert torch.equal(tensor, resumed.state_dict()[key]), key


def test_pyfunc_output_is_what_log_predictions_takes():
    model, *_ = job("multiclass", 100)
    features = multiclass_rows(6, seed=3).drop(columns="label").set_axis([10, 11, 12, 13, 14, 15])
    out = TabularPyfunc(model, "served").predict(None, features)
    assert list(out.columns) == ["served", *(proba_column(c) for c in CLASSES)]
    assert output_proba_column("ant") == proba_column("ant")  # the pickled copy of the rule
    assert list(out.index) == list(features.index)
    assert set(out["served"]) <= set(CLASSES)
    proba = out[[proba_column(c) for c in CLASSES]].to_numpy()
    assert np.allclose(proba.sum(axis=1), 1.0)
    assert out["served"].tolist() == [CLASSES[i] for i in proba.argmax(axis=1)]
    joined = features.join(out)
    assert len(joined) == 6 and joined["served"].notna().all()
    reg, *_ = job("regression", 100)
    value = TabularPyfunc(reg).predict(None, regression_rows(4, seed=1))
    assert isinstance(value, pd.DataFrame) and list(value.columns) == ["prediction"]
    np.testing.assert_allclose(value["prediction"], reg.predict_proba(regression_rows(4, seed=1)))
