"""A regression model's check against real Evidently: MAE, RMSE, MAPE and R² with intervals, label
drift, the predicted value as the score column, segments by MAE, JSON and report."""
from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import mean_absolute_error, mean_absolute_percentage_error, mean_squared_error, r2_score

from monitor.config import DriftConfig
from monitor.drift import evaluate_window, prepare_reference, save_report
from tests.monitor.drift.task_frames import expected_mae, regression_frame, regression_model

BASELINE = {"mae": 1.6, "rmse": 2.0, "r2": 0.82}


@pytest.fixture(scope="module")
def model():
    return regression_model(segments=["region"])


@pytest.fixture(scope="module")
def drift():
    return DriftConfig()


@pytest.fixture(scope="module")
def ref(model, drift):
    return prepare_reference(regression_frame(4000, seed=1, window=False), model, drift)


@pytest.fixture(scope="module")
def stationary_window():
    return regression_frame(3000, seed=2, labelled=0.7)


@pytest.fixture(scope="module")
def stationary(ref, model, drift, stationary_window):
    return evaluate_window(ref, stationary_window, model, drift, BASELINE)


@pytest.fixture(scope="module")
def noisy(ref, model, drift):
    return evaluate_window(ref, regression_frame(3000, seed=3, noise=4.0), model, drift, BASELINE)


def test_figures_are_scikit_learns_on_the_labelled_rows(stationary, stationary_window):
    lab = stationary_window[stationary_window["label"].notna()]
    y, pred = lab["label"].to_numpy(), lab["prediction"].to_numpy()
    r = stationary
    assert r.task == "regression" and r.classes is None and r.labelled_rows == len(lab)
    assert r.mae == pytest.approx(mean_absolute_error(y, pred))
    assert r.rmse == pytest.approx(np.sqrt(mean_squared_error(y, pred)))
    assert r.mape == pytest.approx(mean_absolute_percentage_error(y, pred))
    assert r.r2 == pytest.approx(r2_score(y, pred))
    for value, ci in ((r.mae, r.mae_ci), (r.rmse, r.rmse_ci), (r.r2, r.r2_ci)):
        assert ci[0] < value < ci[1]
    assert r.baseline_mae == 1.6
    assert r.accuracy is None and r.roc_auc is None and r.macro_f1 is None and r.positive_rate is None
    assert {"mae", "rmse", "mape", "r2"} <= set(r.baselines)


def test_more_noise_raises_the_mae_and_the_intervals_cover_the_truth(stationary, noisy):
    assert noisy.mae_ci[0] > stationary.mae_ci[1]
    assert noisy.rmse > stationary.rmse and noisy.r2 < stationary.r2
    assert stationary.mae_ci[0] <= expected_mae(2.0) <= stationary.mae_ci[1]
    assert noisy.mae_ci[0] <= expected_mae(4.0) <= noisy.mae_ci[1]
    assert noisy.label_drift.drifted and not stationary.label_drift.drifted   # a wider target
    assert not noisy.prediction_drift.drifted                                # the predictions did not move


def test_the_predicted_value_is_the_score_column_tested_once(stationary):
    assert stationary.prediction_drift.name == "score" and stationary.prediction_drift.method == "wasserstein"
    assert stationary.output_drift == []
    assert stationary.label_drift.name == "label" and stationary.label_drift.method == "wasserstein"


def test_json_is_strict_and_the_report_renders(stationary, tmp_path):
    body = json.loads(json.dumps(stationary.to_dict(), allow_nan=False))
    assert body["task"] == "regression" and body["mae"] == pytest.approx(stationary.mae)
    assert body["segments"][0]["mae_ci"] is not None
    paths = save_report(stationary, tmp_path)
    report = json.loads(paths.json.read_text())
    values = {m["metric_name"].split("(")[0]: m["value"] for m in report["metrics"]}
    assert values["MAE"]["mean"] == pytest.approx(stationary.mae)
    assert values["RMSE"] == pytest.approx(stationary.rmse)
    assert values["R2Score"] == pytest.approx(stationary.r2)
    assert "MAE" in paths.html.read_text()


def test_segments_report_mae_with_intervals(stationary, noisy):
    assert [s.value for s in stationary.segments] == ["eu", "us", "apac"]
    for s in stationary.segments:
        assert s.accuracy is None and s.accuracy_ci is None and s.recall is None
        assert s.mae_ci[0] <= expected_mae(2.0) <= s.mae_ci[1]
        assert s.reference_mae == pytest.approx(expected_mae(2.0), rel=0.15)
    for s in noisy.segments:
        assert s.mae_ci[0] > s.reference_mae


def test_no_mape_when_a_target_is_zero(ref, model, drift):
    frame = regression_frame(1200, seed=8)
    frame.loc[frame.index[:3], "label"] = 0.0
    r = evaluate_window(ref, frame, model, drift, BASELINE)
    assert r.mape is None and r.mae is not None
    assert not any(m["metric_name"].startswith("MAPE") for m in r.snapshot.dict()["metrics"])
    crossing = regression_frame(1200, seed=8)
    crossing["label"] = crossing["label"] - crossing["label"].median()  # half the targets below 0
    r = evaluate_window(ref, crossing, model, drift, BASELINE)
    assert r.mape is None and r.mae is not None
    assert not any(m["metric_name"].startswith("MAPE") for m in r.snapshot.dict()["metrics"])


def test_residual_shift_is_measured_against_the_reference_either_way(ref, model, drift, stationary):
    """The mean signed residual and its shift from the reference's in residual SDs (issue 34, item 7):
    near 0 on a stationary window, about 0.5 when the targets move by half a residual SD."""
    assert {"bias", "residual_sd"} <= set(ref.metrics) and ref.metrics["residual_shift"] == 0.0
    assert ref.metrics["residual_sd"] == pytest.approx(2.0, rel=0.1)
    assert stationary.residual_shift < 0.1 and abs(stationary.bias) < 0.2
    for sign in (1.0, -1.0):
        frame = regression_frame(2000, seed=5)
        frame["label"] = frame["label"] - sign * 1.0          # the model now over- (under-) predicts by 1
        r = evaluate_window(ref, frame, model, drift, BASELINE)
        assert r.residual_shift == pytest.approx(0.5, abs=0.1) and np.sign(r.bias) == sign
        assert r.to_dict()["residual_shift"] == pytest.approx(r.residual_shift)
