"""Each task through the real loop: `driftloop train` (task inferred) -> registered version with
task and classes -> the pyfunc's output columns -> `driftloop retrain` on a concept change
(promoted) -> the old concept again (the earlier champion reinstated); and a useless challenger
refused by the task's floor. Real MLflow on SQLite, real PyTorch on CPU."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from monitor.cli import main
from monitor.tasks import proba_column
from tests.trainer.conftest import make_config
from tests.trainer.task_data import CLASSES, multiclass_rows, regression_rows
from trainer import retrain, train_baseline

FAST = {"DRIFTLOOP_TRAINING__EXPORT__ONNX": "false", "DRIFTLOOP_TRAINING__HIDDEN": "[32]",
        "DRIFTLOOP_TRAINING__EPOCHS": "15", "DRIFTLOOP_TRAINING__RETRAIN_EPOCHS": "10"}


def rows(task: str, n: int, seed: int, shift: bool = False) -> pd.DataFrame:
    if task == "multiclass":
        return multiclass_rows(n, seed, shift, names=True)
    return regression_rows(n, seed, shift)


def version_tags(home, version: str) -> dict[str, str]:
    from mlflow import MlflowClient
    uri = f"sqlite:///{home / 'mlflow.db'}"
    return MlflowClient(tracking_uri=uri, registry_uri=uri).get_model_version("driftloop-demo", version).tags


def served(home, version: str, features: pd.DataFrame):
    import mlflow
    import mlflow.pyfunc
    mlflow.set_tracking_uri(f"sqlite:///{home / 'mlflow.db'}")
    try:
        return mlflow.pyfunc.load_model(f"models:/driftloop-demo/{version}").predict(features)
    finally:
        mlflow.set_tracking_uri(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("task", ["multiclass", "regression"])
def test_train_retrain_recall_through_the_cli(home, tmp_path, capsys, monkeypatch, task):
    for key, value in FAST.items():
        monkeypatch.setenv(key, value)
    rows(task, 1000, seed=1).to_csv(tmp_path / "train.csv", index=False)
    rows(task, 900, seed=21, shift=True).to_csv(tmp_path / "changed.csv", index=False)
    rows(task, 900, seed=31).to_csv(tmp_path / "back.csv", index=False)

    assert main(["train", "--data", "train.csv", "--quiet"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith(f"Registered driftloop-demo v1 (champion) ({task}): test ")
    columns = json.loads(version_tags(home, "1")["driftloop.columns"])
    assert columns["task"] == task and version_tags(home, "1")["driftloop.task"] == task
    assert columns["classes"] == (CLASSES if task == "multiclass" else None)

    features = rows(task, 8, seed=5).drop(columns="label").set_axis(range(100, 108))
    output = served(home, "1", features)
    if task == "multiclass":
        assert list(output.columns) == ["prediction", *(proba_column(c) for c in CLASSES)]
        assert set(output["prediction"]) <= set(CLASSES)
    else:
        assert list(output.columns) == ["prediction"] and output["prediction"].between(40, 160).all()
    assert list(features.join(output).index) == list(features.index)

    assert main(["retrain", "--data", "changed.csv", "--json"]) == 0
    changed = json.loads(capsys.readouterr().out)
    assert (changed["outcome"], changed["champion_version"]) == ("promoted", "2"), changed["reasons"]
    lead = "mae" if task == "regression" else "accuracy"
    assert f"challenger_{lead}" in changed["metrics"]

    assert main(["retrain", "--data", "back.csv", "--json"]) == 0  # the first concept again
    back = json.loads(capsys.readouterr().out)
    assert (back["outcome"], back["champion_version"], back["challenger_version"]) == ("promoted", "1", "1"), back
    assert back["reasons"][0].startswith("earlier version 1 fits the current concept")


def noise(task: str, n: int, seed: int) -> pd.DataFrame:
    """Labels that have nothing to do with the features (multiclass: 60 % one class)."""
    rng = np.random.default_rng(seed)
    data = rows(task, n, seed)
    if task == "multiclass":
        return data.assign(label=rng.choice(CLASSES, size=n, p=[0.6, 0.1, 0.1, 0.1, 0.1]))
    return data.assign(label=rng.normal(100.0, 15.0, n))


@pytest.mark.parametrize("task", ["multiclass", "regression"])
def test_a_useless_challenger_is_refused_by_the_task_floor(tmp_path, mlflow_template, task):
    model = {"task": task, **({"classes": CLASSES} if task == "multiclass" else {})}
    cfg = make_config(tmp_path / "home", mlflow_template, model=model,
                      training={"export": {"onnx": False}, "cold_start": "never", "epochs": 12, "retrain_epochs": 8,
                                "hidden": [32]})
    assert train_baseline(cfg, rows(task, 800, seed=1)).champion
    outcome = retrain(cfg, noise(task, 900, seed=3))
    assert outcome is not None and outcome.outcome == "rejected"
    m = outcome.metrics
    if task == "multiclass":
        assert m["majority_rate"] == pytest.approx(0.6, abs=0.06)
        assert any("majority-class rate" in r for r in outcome.reasons), outcome.reasons
    else:
        assert m["challenger_r2_lower"] < 0 and m["challenger_mae"] < m["champion_mae"]  # better, not good
        assert any("R² lower bound" in r for r in outcome.reasons), outcome.reasons
