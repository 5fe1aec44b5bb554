"""A/B on live traffic before promotion (trainer/live.py) and the gates that use the export
(``training.gate.requires_live_win``, ``training.gate.max_latency_ms``, ``training.gate.max_model_mb``), through
real retrains."""
from __future__ import annotations

import json

import pytest
from mlflow import MlflowClient

from tests.trainer.conftest import make_config
from trainer.live import LiveComparison
from trainer.registry import load_champion
from trainer.retraining import retrain
from trainer.synthetic import make_dataset


def served_window(cfg, rows, version: str | None = None):
    """Rows as the store returns them: features, label and what the champion served for them."""
    champion = load_champion(cfg)
    scores = champion.predict_proba(rows)
    return rows.assign(**{cfg.model.score: scores, cfg.model.prediction: (scores > cfg.model.threshold).astype(int),
                          "model_version": version or champion.version})


def with_training(tcfg, **training):
    return make_config(tcfg.home, None, training=training)


def test_a_concept_change_is_won_on_live_traffic_and_the_comparison_is_on_the_run(tcfg, champion, tmp_path):
    cfg = with_training(tcfg, gate={"requires_live_win": True})
    window = served_window(cfg, make_dataset(1500, seed=21, concept_shift=1.0))
    out = retrain(cfg, window, trigger="alert")
    assert out.outcome == "promoted", out.reasons
    assert any(r.startswith("wins on live traffic: accuracy") for r in out.reasons)
    c = MlflowClient(cfg.tracking_uri)
    paths = {a.path for a in c.list_artifacts(out.run_id, "live")}
    assert paths == {"live/comparison.json", "live/prediction_drift.html"}
    comparison = json.loads(open(c.download_artifacts(out.run_id, "live/comparison.json", str(tmp_path))).read())
    assert comparison["rows"] == 1500 and comparison["labelled_rows"] == 450   # holdout_fraction 0.3
    assert comparison["challenger_accuracy"] > comparison["champion_accuracy"] and comparison["mcnemar_p"] < 0.05
    assert comparison["agreement"] < 0.9 and comparison["score_drifted"] is True
    metrics = c.get_run(out.run_id).data.metrics
    assert metrics["live_agreement"] == pytest.approx(comparison["agreement"])


def test_without_served_scores_the_live_win_cannot_be_shown_and_is_required(tcfg, champion):
    cfg = with_training(tcfg, gate={"requires_live_win": True})
    out = retrain(cfg, make_dataset(1500, seed=21, concept_shift=1.0))  # a file: nothing was served
    assert out.outcome == "rejected"
    assert out.reasons == ["no live comparison: the window carries no served scores (not read from the store)"]
    assert load_champion(cfg).version == "1"


def test_rows_served_by_another_version_are_not_the_champions(tcfg, champion):
    cfg = with_training(tcfg, gate={"requires_live_win": True})
    out = retrain(cfg, served_window(cfg, make_dataset(1500, seed=21, concept_shift=1.0), version="9"))
    assert out.outcome == "rejected"
    assert out.reasons == ["no live comparison: no row of the window was served by champion v1"]


@pytest.mark.parametrize("limit, reason", [({"gate": {"max_model_mb": 0.001}}, "too big: onnx-int8 is 0.0"),
                                           ({"gate": {"max_latency_ms": 1e-6}},
                                            "too slow: onnx-int8 p99 single-row latency")])
def test_a_better_challenger_that_is_too_big_or_slow_is_rejected_with_that_reason(tcfg, champion, limit, reason):
    cfg = with_training(tcfg, **limit)
    out = retrain(cfg, make_dataset(1500, seed=21, concept_shift=1.0))
    assert out.outcome == "rejected"
    assert len(out.reasons) == 1 and out.reasons[0].startswith(reason), out.reasons
    assert load_champion(cfg).version == "1"


def test_the_verdict_needs_significance_and_no_significant_loss():
    base = dict(champion_version="3", rows=900, agreement=0.8, labelled_rows=300)
    win = LiveComparison(**base, champion_accuracy=0.70, challenger_accuracy=0.80, mcnemar_p=0.001,
                         champion_roc_auc=0.75, challenger_roc_auc=0.76, delong_p=0.4)
    assert win.verdict(0.05) == (True, "wins on live traffic: accuracy 0.8000 vs 0.7000 (p=0.001) on 300 "
                                       "labelled live rows served by v3 (agreement 0.800)")
    assert win.verdict(0.0005)[0] is False and win.verdict(0.0005)[1].startswith("no significant live win at p<0.0005")
    mixed = LiveComparison(**base, champion_accuracy=0.70, challenger_accuracy=0.80, mcnemar_p=0.001,
                           champion_roc_auc=0.80, challenger_roc_auc=0.70, delong_p=0.01)
    assert mixed.verdict(0.05)[1].startswith("loses on live traffic: ROC AUC 0.7000 vs 0.8000 (p=0.01)")
    assert LiveComparison("3", unavailable="because").verdict(0.05) == (False, "no live comparison: because")
