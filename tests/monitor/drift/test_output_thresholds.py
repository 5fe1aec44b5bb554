"""Output drift thresholds from the reference's own bootstrap (issue 34, item 8): a confident
classifier's stationary windows are not flagged; a real output shift still is."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from monitor.drift import evaluate_window, prepare_reference
from monitor.drift.output_thresholds import calibrate, null_threshold, size_bucket
from monitor.drift.runner import ColumnPlan, ColumnVerdict
from monitor.tasks import internal_proba_columns
from tests.monitor.drift.conftest import reference, window
from tests.monitor.drift.task_frames import K, PRIORS_SHIFTED, multiclass_frame, multiclass_model

BASELINE = {"accuracy": 0.8, "roc_auc": 0.85}


def confident(frame: pd.DataFrame, score_shift: float = 0.0) -> pd.DataFrame:
    """The frame scored by a confident model: its logistic scorer's logit times 8, scores at 0 and 1."""
    out = frame.copy()
    logit = np.log(out["score"] / (1 - out["score"]))
    out["score"] = 1.0 / (1.0 + np.exp(-(8.0 * logit + score_shift)))
    if "prediction" in out.columns:
        out["prediction"] = pd.array((out["score"] >= 0.5).astype(int), dtype="Int64")
    return out


@pytest.fixture(scope="module")
def confident_ref(cfg):
    return prepare_reference(confident(reference(5000)), cfg.model, cfg.drift)


def test_size_bucket_rounds_down_to_a_power_of_root_two():
    assert [size_bucket(n) for n in (1, 2, 3, 200, 256, 300, 4096, 5000)] == [1, 2, 2, 181, 256, 256, 4096, 4096]


def test_confident_stationary_windows_are_not_flagged_and_the_threshold_is_cached(cfg, confident_ref):
    results = []
    for seed in range(10, 14):
        cur = confident(window(80, seed=seed))
        r = evaluate_window(confident_ref, cur, cfg.model, cfg.drift, BASELINE, rng_seed=seed)
        assert not r.prediction_drift.drifted, r.prediction_drift
        assert r.prediction_drift.threshold > 0.1   # raised from Evidently's 0.1 by the reference's own noise
        results.append((r.prediction_drift.score, cur))
    assert sum(score >= 0.1 for score, _ in results) >= 2   # what Evidently's fixed 0.1 flagged (issue 34)
    assert len(confident_ref.output_thresholds) == 1        # one column, one window size: computed once
    score, cur = max(results, key=lambda x: x[0])
    fixed = cfg.drift.model_copy(update={"output_drift_quantile": None})   # null: Evidently's threshold
    assert evaluate_window(confident_ref, cur, cfg.model, fixed, BASELINE, rng_seed=14).prediction_drift.drifted


def test_a_real_output_shift_is_still_flagged(cfg, confident_ref):
    shifted = confident(window(80, seed=20), score_shift=6.0)   # most rows now scored positive
    r = evaluate_window(confident_ref, shifted, cfg.model, cfg.drift, BASELINE)
    assert r.prediction_drift.drifted and r.prediction_drift.score > r.prediction_drift.threshold


def sharp(frame: pd.DataFrame) -> pd.DataFrame:
    """A multiclass frame scored by a confident model (an image classifier's): probabilities ** 8."""
    out = frame.copy()
    columns = internal_proba_columns(K)
    p = out[columns].to_numpy() ** 8
    p /= p.sum(axis=1, keepdims=True)
    out[columns] = p
    out["score"] = p.max(axis=1)
    return out


def test_a_confident_multiclass_model_s_outputs_flag_a_prior_shift_only(cfg):
    model, drift = multiclass_model(), cfg.drift
    ref = prepare_reference(sharp(multiclass_frame(4000, seed=1, window=False)), model, drift)
    fixed = drift.model_copy(update={"output_drift_quantile": None})
    for seed in (10, 11):
        cur = sharp(multiclass_frame(150, seed=seed))
        outputs = [evaluate_window(ref, cur, model, d, {}).output_drift for d in (drift, fixed)]
        assert [f.name for f in outputs[0] if f.drifted] == []
        assert [f.name for f in outputs[1] if f.drifted] != []   # some class probability past 0.1 by chance
    shifted = evaluate_window(ref, sharp(multiclass_frame(150, seed=30, priors=PRIORS_SHIFTED)), model, drift, {})
    assert {"prediction", "proba_bike"} <= {f.name for f in shifted.output_drift if f.drifted}


def test_large_windows_and_p_value_tests_keep_evidently_s_threshold():
    rng = np.random.default_rng(0)
    values = pd.Series(rng.normal(size=5000))
    assert null_threshold(values, "numeric", "wasserstein", 4096, 0.99, seed=1) < 0.1
    verdicts = {"score": ColumnVerdict("ks", 0.01, 0.05, True), "p": ColumnVerdict("wasserstein", 0.08, 0.1, False)}
    frame = pd.DataFrame({"score": values, "p": values})
    cache: dict = {}
    out = calibrate(verdicts, [ColumnPlan("score", "numeric", "ks"), ColumnPlan("p", "numeric", "wasserstein")],
                    frame, frame, cache, 0.99)
    assert out == verdicts   # ks is a p-value test; p's noise at 5,000 rows is below 0.1
    assert calibrate(verdicts, [ColumnPlan("p", "numeric", "wasserstein")], frame, frame.iloc[:50], {}, None) \
        == verdicts          # drift.output_drift_quantile: null keeps Evidently's thresholds
