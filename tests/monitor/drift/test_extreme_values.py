"""No stored value can make a check fail (issue 34, item 9): extreme finite numbers (1e308, float32's
edge, denormals, 0, whole columns at one huge value), huge categories and tiny labels fed into
every task's check always give a judged result: strict JSON, and a verdict of the alert policy."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.config import AlertsConfig, DriftConfig
from monitor.daemon.decisions.policy import AlertPolicy, Verdict
from monitor.daemon.runtime.checks import CheckOutcome
from monitor.daemon.runtime.controller import observation
from monitor.drift import evaluate_window, prepare_reference
from monitor.drift.bounded import binnable, float32_bounded
from monitor.finite import FLOAT32_MAX, FLOAT32_TINY
from tests.monitor.drift.conftest import reference as binary_reference
from tests.monitor.drift.conftest import window as binary_window
from tests.monitor.drift.task_frames import multiclass_frame, multiclass_model, regression_frame, regression_model

EXTREMES = [1e308, -1e308, FLOAT32_MAX, -FLOAT32_MAX, 1e38, -1e38, 1e16, 1e-310, -1e-310, 5e-324, 0.0]
ROWS = 300


@pytest.fixture(scope="module")
def tasks(cfg):
    """Per task: its model, prepared reference, a clean window and the columns that hold numbers."""
    drift = DriftConfig()
    binary = cfg.model
    multi, regr = multiclass_model(segments=["region"]), regression_model(segments=["region"])
    return {
        "binary": (binary, prepare_reference(binary_reference(800), binary, drift), binary_window(ROWS, seed=3),
                   ["x0", "x5", "score"]),
        "multiclass": (multi, prepare_reference(multiclass_frame(800, 1, window=False), multi, drift),
                       multiclass_frame(ROWS, 2), ["x0", "x3", "score"]),
        "regression": (regr, prepare_reference(regression_frame(800, 1, window=False), regr, drift),
                       regression_frame(ROWS, 2, labelled=0.7), ["x0", "x3", "prediction", "label"]),
    }


def _judged(model, ref, window) -> Verdict:
    result = evaluate_window(ref, window, model, DriftConfig(), {"accuracy": 0.8, "roc_auc": 0.85, "mae": 1.6})
    json.dumps(result.to_dict(), allow_nan=False)   # recorded as strict JSON: every figure finite or null
    outcome = CheckOutcome(0.0, "ok", "checked", champion_version="1", result=result,
                           window_rows=result.window_rows, labelled_rows=result.labelled_rows)
    return AlertPolicy(AlertsConfig(), min_labels=50).observe(observation(outcome))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(task=st.sampled_from(["binary", "multiclass", "regression"]), data=st.data())
def test_extreme_values_in_any_column_leave_a_judged_check(tasks, task, data):
    model, ref, clean, numeric = tasks[task]
    window = clean.copy()
    for column in data.draw(st.lists(st.sampled_from(numeric), min_size=1, max_size=3, unique=True)):
        value = data.draw(st.sampled_from(EXTREMES))
        if column == "score":  # a classifier's score is a probability: only its tiny values are stored
            value = data.draw(st.sampled_from([1e-310, 5e-324, 0.0]))
        rows = data.draw(st.sampled_from([3, ROWS]))   # a few rows, or the whole column at one value
        window.loc[: rows - 1, column] = value
        if column == "prediction":                     # a regression's predicted value is its score too
            window.loc[: rows - 1, "score"] = value
    if data.draw(st.booleans()):                       # a huge category: every row its own long value
        window["region"] = [f"{i:06d}" + "r" * 1000 for i in range(ROWS)]
    assert isinstance(_judged(model, ref, window), Verdict)


@pytest.mark.parametrize("label", [0.0, 1e-310, FLOAT32_TINY])
def test_a_regression_window_of_zero_or_tiny_labels_is_judged(tasks, label):
    """Evidently's regression metrics divide by the targets (its MAPE baseline): every target 0
    made it fail; the check goes on, its figures are numpy's."""
    model, ref, clean, _ = tasks["regression"]
    window = clean.copy()
    window.loc[window["label"].notna(), "label"] = label
    verdict = _judged(model, ref, window)
    assert verdict.performance_known


def test_three_rows_at_1e308_no_longer_blind_the_check(tasks):
    """The report: three rows at 1e308 in a feature ended every check in "cannot convert float NaN
    to integer"; one such prediction gave an MAE of 5e304."""
    model, ref, clean, _ = tasks["regression"]
    window = clean.copy()
    window.loc[:2, "x0"] = 1e308
    result = evaluate_window(ref, window, model, DriftConfig(), {"mae": 1.6})
    assert result.mae == pytest.approx(evaluate_window(ref, clean, model, DriftConfig(), {"mae": 1.6}).mae)
    window.loc[:2, "x0"] = clean.loc[:2, "x0"]
    window.loc[:0, ["prediction", "score"]] = 1e308
    labelled = int(window["label"].notna().sum())
    mae = evaluate_window(ref, window, model, DriftConfig(), {"mae": 1.6}).mae
    assert mae is not None and mae <= 2 * FLOAT32_MAX / labelled   # the value is read as float32's largest


def test_bounded_values_keep_what_fits_and_missing_values():
    frame = pd.DataFrame({"x": [1e308, -1e308, 1e-310, 2.5, np.nan], "c": ["a"] * 5,
                          "n": pd.array([1.0, None, 1e-320, 3.0, 4.0], dtype="Float64")})
    out = float32_bounded(frame)
    assert out["x"].tolist()[:4] == [FLOAT32_MAX, -FLOAT32_MAX, 0.0, 2.5] and np.isnan(out["x"].iloc[4])
    assert out["n"].dtype == "Float64" and out["n"].isna().tolist() == [False, True, False, False, False]
    assert out["n"].iloc[2] == 0.0
    assert out["c"].tolist() == frame["c"].tolist() and frame["x"].iloc[0] == 1e308   # the input is untouched
    clean = pd.DataFrame({"x": [1.0, -2.0, np.nan]})
    assert float32_bounded(clean) is clean


def test_only_columns_numpy_cannot_bin_are_rescaled():
    ref = pd.DataFrame({"a": np.arange(100.0), "b": np.arange(100.0)})
    cur = pd.DataFrame({"a": np.full(50, 1e16), "b": np.arange(50.0)})
    new_ref, new_cur = binnable(ref, cur, [["a"], ["b"]])
    assert new_cur["b"].equals(cur["b"]) and new_ref["b"].equals(ref["b"])
    assert np.histogram(new_cur["a"], bins=10)[0].sum() == 50             # numpy bins it now
    assert new_cur["a"].max() == 1e6 and new_ref["a"].median() == pytest.approx(0.0)
    assert binnable(ref, ref, [["a"], ["b"]]) == (ref, ref)


@pytest.mark.parametrize("scale", [1e-9, 1e-5])
def test_a_feature_of_tiny_spread_drifts_as_it_would_in_units(cfg, scale):
    """A feature of standard deviation 1e-10 moved ten thousand spreads read 0.0005 against the 0.1
    threshold: Evidently's normed Wasserstein floors the reference spread at 0.001. The same columns
    in other units must read the same drift."""
    model, drift = cfg.model, DriftConfig()
    ref, shifted, same = binary_reference(2000), binary_window(1000, seed=3), binary_window(1000, seed=4)
    shifted["x0"] = shifted["x0"] + 1.0        # one spread up
    results = {}
    for factor in (1.0, scale):
        frames = []
        for frame in (ref, shifted, same):
            scaled = frame.copy()
            scaled["x0"] = scaled["x0"] * factor
            frames.append(scaled)
        prepared = prepare_reference(frames[0], model, drift)
        results[factor] = [next(f for f in evaluate_window(prepared, w, model, drift, {"accuracy": 0.8}).features
                                if f.name == "x0") for w in frames[1:]]
    (moved, still), (tiny_moved, tiny_still) = results[1.0], results[scale]
    assert moved.drifted and not still.drifted
    assert tiny_moved.drifted and not tiny_still.drifted, (tiny_moved, tiny_still)
    assert tiny_moved.score == pytest.approx(moved.score, rel=0.05) and tiny_moved.method == moved.method
