"""The live A/B (trainer/live.py) and shadow mode (trainer/shadow.py) for multiclass and regression
models: real PyTorch models, Evidently and, for the shadow, a real MLflow registry."""
from __future__ import annotations

import time

import pandas as pd
import pytest

from monitor.tasks import internal_proba_column
from tests.trainer.task_data import ROWS, task_config
from trainer.build import build_model
from trainer.live import compare_live
from trainer.loop import LoopConfig
from trainer.runs import fit_frames

FAST = {"hidden": [32, 16]}


def fitted(cfg, rows: pd.DataFrame, path):
    model = build_model(cfg, rows)
    fit_frames(model, rows.iloc[:1200], rows.iloc[1200:], "label", LoopConfig.from_training(cfg.training),
               checkpoint_path=path, resume=False)
    return model.eval()


@pytest.fixture(scope="module", params=["multiclass", "regression"])
def pair(request, tmp_path_factory):
    """(config, champion fitted to the old concept, challenger fitted to the new one)."""
    import torch
    task = request.param
    home = tmp_path_factory.mktemp(task)
    cfg = task_config(home / "home", task, training=FAST)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        old = fitted(cfg, ROWS[task](1500, seed=1), home / "old.pt")
        new = fitted(cfg, ROWS[task](1500, seed=2, shift=True), home / "new.pt")
    finally:
        torch.set_num_threads(before)
    return cfg, old, new


def served_by(cfg, model, rows: pd.DataFrame, version: str = "1", start: float | None = None) -> pd.DataFrame:
    """Rows as the store returns them: what ``model`` served (score, prediction, class probabilities)."""
    out = model.predict_proba(rows)
    m = cfg.model
    if m.task == "multiclass":
        served = rows.assign(**{m.score: out.max(axis=1), m.prediction: out.argmax(axis=1)},
                             **{internal_proba_column(i): out[:, i] for i in range(out.shape[1])})
    else:
        served = rows.assign(**{m.score: out, m.prediction: out})
    served = served.assign(model_version=version)
    if start is not None:
        served["ts"] = pd.to_datetime([start + i for i in range(len(rows))], unit="s", utc=True)
    return served


def test_a_challenger_fitted_to_the_new_concept_wins_on_live_traffic(pair):
    cfg, old, new = pair
    window = served_by(cfg, old, ROWS[cfg.model.task](600, seed=3, shift=True))
    comparison, snapshot = compare_live(new, window, window, cfg, "1")
    assert comparison.unavailable is None and comparison.task == cfg.model.task
    assert comparison.rows == comparison.labelled_rows == 600
    assert comparison.score_drift_method is not None and comparison.score_drift is not None and snapshot is not None
    if cfg.model.task == "regression":
        assert comparison.challenger_mae < 0.5 * comparison.champion_mae and comparison.paired_t_p < 1e-6
        assert comparison.mean_abs_difference > comparison.challenger_mae and comparison.agreement is None
    else:
        assert comparison.challenger_accuracy > comparison.champion_accuracy + 0.2 and comparison.mcnemar_p < 1e-6
        assert comparison.challenger_roc_auc > comparison.champion_roc_auc and comparison.delong_p < 1e-6
        assert comparison.agreement < 0.7 and comparison.mean_abs_difference is None
    better, worse = comparison.significant(0.05)
    assert len(better) == (1 if cfg.model.task == "regression" else 2) and worse == []
    assert comparison.verdict(0.05)[0] is True


def test_the_same_model_is_no_win_and_no_loss(pair):
    cfg, old, _ = pair
    window = served_by(cfg, old, ROWS[cfg.model.task](600, seed=3, shift=True))
    comparison, _ = compare_live(old, window, window, cfg, "1")
    assert comparison.significant(0.05) == ([], [])
    assert comparison.verdict(0.05)[0] is False
    if cfg.model.task == "regression":
        assert comparison.mean_abs_difference == 0.0 and comparison.paired_t_p == 1.0
        assert comparison.challenger_mae == comparison.champion_mae
    else:
        assert comparison.agreement == 1.0 and comparison.mcnemar_p == 1.0 and comparison.delong_p == 1.0


def test_a_challenger_of_the_wrong_concept_loses(pair):
    cfg, old, new = pair
    window = served_by(cfg, old, ROWS[cfg.model.task](600, seed=4))   # traffic kept the old concept
    comparison, _ = compare_live(new, window, window, cfg, "1")
    better, worse = comparison.significant(0.05)
    assert better == [] and worse
    assert comparison.verdict(0.05)[0] is False


@pytest.mark.parametrize("pair", ["multiclass"], indirect=True)
def test_a_multiclass_window_without_class_probabilities_is_no_comparison(pair):
    cfg, old, new = pair
    window = served_by(cfg, old, ROWS["multiclass"](300, seed=3)).drop(columns=internal_proba_column(2))
    comparison, snapshot = compare_live(new, window, window, cfg, "1")
    assert comparison.unavailable.startswith("the window carries no served class probabilities") and snapshot is None


def test_a_regression_shadow_is_judged_on_mae(tmp_path, mlflow_template):
    """Two registered versions (v1 champion on the old concept, v2 on the new) and v2 held in shadow:
    a window of the new concept counts for it, a window of the old one rejects it on MAE."""
    from trainer import registry as reg
    from trainer import train_baseline
    from trainer.shadow import hold, observe
    cfg = task_config(tmp_path / "home", "regression", mlflow_template, training={**FAST, "export": {"onnx": False}},
                      drift={"min_rows": 200})
    train_baseline(cfg, ROWS["regression"](1500, seed=1))
    train_baseline(cfg, ROWS["regression"](1500, seed=2, shift=True))
    started = time.time()
    with reg.session(cfg):
        registry = reg.Registry(cfg)
        assert registry.alias_version(reg.CHAMPION) == "1"
        hold(registry, "2", "1", 2, started)
        champion = reg.load_version(cfg, registry, "1").model
    counted = observe(cfg, served_by(cfg, champion, ROWS["regression"](300, seed=3, shift=True), start=started + 10))
    assert counted.kind == "counted"
    assert counted.message.startswith("shadow v2: window 1/2 counted (300 rows, mean |prediction difference| ")
    rejected = observe(cfg, served_by(cfg, champion, ROWS["regression"](300, seed=4), start=started + 1000))
    assert rejected.kind == "rejected" and rejected.ended
    assert rejected.message.startswith("shadow v2: rejected: worse than v1 on live traffic: MAE")
    with reg.session(cfg):
        assert reg.Registry(cfg).alias_version(reg.CHAMPION) == "1"


def test_a_multiclass_retrain_must_win_on_the_traffic_its_champion_served(tmp_path, mlflow_template):
    """Through the real retrain: a store window (class indices, served probabilities) of a new
    concept; the challenger is promoted only with a live win, recorded on its run."""
    import json

    from mlflow import MlflowClient

    from trainer import train_baseline
    from trainer.registry import load_champion
    from trainer.retraining import retrain
    cfg = task_config(tmp_path / "home", "multiclass", mlflow_template,
                      training={**FAST, "export": {"onnx": False}, "gate": {"requires_live_win": True}})
    train_baseline(cfg, ROWS["multiclass"](1500, seed=1, names=True))
    window = served_by(cfg, load_champion(cfg).model, ROWS["multiclass"](1500, seed=5, shift=True))
    out = retrain(cfg, window, trigger="alert")
    assert out.outcome == "promoted", out.reasons
    assert any(r.startswith("wins on live traffic: accuracy") for r in out.reasons)
    comparison = json.loads(open(MlflowClient(cfg.tracking_uri).download_artifacts(
        out.run_id, "live/comparison.json", str(tmp_path))).read())
    assert comparison["task"] == "multiclass" and comparison["rows"] == 1500
    assert comparison["labelled_rows"] == out.metrics["holdout_rows"]   # the gate's held-out rows
    assert comparison["challenger_roc_auc"] > comparison["champion_roc_auc"] and comparison["agreement"] < 0.7
