"""Labels chosen by the score (monitor.drift.selection): real estimators fitted on a reference,
windows whose labelled rows are a random share, a reviewed subset, or late, for each task."""
from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from monitor.config import ModelConfig
from monitor.drift.estimators import fit_estimator
from monitor.drift.frames import labelled_rows
from monitor.drift.selection import label_selection

BINARY = ModelConfig(features=[{"name": "x"}], task="binary")


def _binary(n: int, seed: int, angle: float = 0.0) -> pd.DataFrame:
    """A window scored by a model of x0 (score = sigmoid(3 x0)); the labels follow a boundary turned
    ``angle`` degrees towards x1 (0: the model's concept holds)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 2))
    a = np.deg2rad(angle)
    p = 1 / (1 + np.exp(-3 * (np.cos(a) * x[:, 0] + np.sin(a) * x[:, 1])))
    score = 1 / (1 + np.exp(-3 * x[:, 0]))
    return pd.DataFrame({"x": x[:, 0], "score": score, "prediction": (score >= 0.5).astype(int),
                         "label": (rng.uniform(size=n) < p).astype(float),
                         "ts": pd.date_range("2026-01-01", periods=n, freq="s", tz="UTC")})


def _fit(cfg: ModelConfig, frame: pd.DataFrame):
    return fit_estimator(cfg, frame, labelled_rows(frame, cfg, "reference"))


def _keep_labels(frame: pd.DataFrame, keep: np.ndarray) -> pd.DataFrame:
    out = frame.copy()
    out.loc[~keep, "label"] = np.nan
    return out


def _reviewed(frame: pd.DataFrame, seed: int) -> np.ndarray:
    """Every row scored 0.5 or more, and a 10 % audit of the rest."""
    return (frame["score"] >= 0.5).to_numpy() | (np.random.default_rng(seed).uniform(size=len(frame)) < 0.1)


def _auc(frame: pd.DataFrame) -> float:
    rows = frame[frame["label"].notna()]
    return float(roc_auc_score(rows["label"], rows["score"]))


def test_a_random_share_of_labels_moves_nothing():
    estimator = _fit(BINARY, _binary(5000, 1))
    window = _binary(5000, 2)
    window = _keep_labels(window, np.random.default_rng(3).uniform(size=len(window)) < 0.2)
    found = label_selection(window, BINARY, estimator)
    assert found is not None and not found.chosen and found.shift == {}
    # The period ends at the newest labelled row: the few rows after it are not counted.
    assert 4900 < found.labelled_rows + found.unlabelled_rows <= 5000 and found.score_p_value > 1e-3


def test_reviewed_labels_move_the_roc_auc_bar_to_what_those_rows_realise_and_a_change_still_falls_below_it():
    reference = _binary(5000, 1)
    estimator = _fit(BINARY, reference)
    level = float(roc_auc_score(reference["label"], reference["score"]))
    window = _binary(5000, 4)
    window = _keep_labels(window, _reviewed(window, 5))
    found = label_selection(window, BINARY, estimator)
    assert found is not None and found.chosen and found.score_distance > 0.5, found
    shift = found.shift
    # The reviewed rows rank inside a narrow band of scores: 5-6 points under the level, nothing changed.
    assert level - _auc(window) > 0.04
    assert -0.08 < shift["roc_auc"] < -0.03, shift
    assert abs(_auc(window) - (level + shift["roc_auc"])) < 0.02, (level, shift, _auc(window))
    assert abs(shift["accuracy"]) < 0.03, shift   # half the reviewed rows are right either way
    # The rules' figures move too: a reviewed positive is rarely missed (recall up), precision as it was.
    assert set(shift) == {"accuracy", "roc_auc", "precision", "recall", "f1"}
    assert shift["recall"] > 0.03 and abs(shift["precision"]) < 0.02, shift
    turned = _binary(5000, 6, angle=90)           # the concept changes: the reviewed rows fall far below
    turned = _keep_labels(turned, _reviewed(turned, 7))
    again = label_selection(turned, BINARY, estimator)
    assert again is not None and again.chosen
    assert (level + again.shift["roc_auc"]) - _auc(turned) > 0.3


def test_labels_only_for_confident_rows_raise_the_accuracy_bar():
    estimator = _fit(BINARY, _binary(5000, 1))
    window = _binary(5000, 8)
    window = _keep_labels(window, (window["score"] - 0.5).abs().to_numpy() > 0.4)
    found = label_selection(window, BINARY, estimator)
    assert found is not None and found.chosen
    assert found.shift["accuracy"] > 0.08, found.shift   # confident rows are right more often


def test_rows_newer_than_the_newest_label_are_late_not_unchosen():
    """Labels one batch late: the newest rows have none yet whatever their scores; the period ends
    at the newest labelled row, and the labels before it are complete: nothing to compare."""
    estimator = _fit(BINARY, _binary(5000, 1))
    window = _binary(4000, 9)
    window = window.sort_values("score").reset_index(drop=True)   # make the late rows the high scores
    window["ts"] = pd.date_range("2026-01-01", periods=len(window), freq="s", tz="UTC")
    late = np.arange(len(window)) >= 3000
    assert label_selection(_keep_labels(window, ~late), BINARY, estimator) is None
    assert label_selection(window.drop(columns="label"), BINARY, estimator) is None


def test_without_an_estimator_the_choice_is_still_reported_but_nothing_moves():
    window = _binary(3000, 10)
    window = _keep_labels(window, _reviewed(window, 11))
    found = label_selection(window, BINARY, None)
    assert found is not None and found.chosen and found.shift == {}
    assert set(found.to_dict()) >= {"labelled_rows", "unlabelled_rows", "score_distance", "chosen", "shift"}


def _multiclass(n: int, seed: int) -> pd.DataFrame:
    """A window of a calibrated 4-class model (labels drawn from its probabilities)."""
    from monitor.tasks import internal_proba_columns
    rng = np.random.default_rng(seed)
    logits = 2.0 * rng.standard_normal((n, 4))
    proba = np.exp(logits - logits.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    label = (rng.uniform(size=(n, 1)) > np.cumsum(proba, axis=1)).sum(axis=1).clip(0, 3)
    out = pd.DataFrame({"x": rng.standard_normal(n), "label": label.astype(float),
                        "prediction": proba.argmax(axis=1), "score": proba.max(axis=1),
                        "ts": pd.date_range("2026-01-01", periods=n, freq="s", tz="UTC")})
    for column, values in zip(internal_proba_columns(4), proba.T):
        out[column] = values
    return out


def test_a_multiclass_window_reviewed_for_one_served_class_is_chosen_by_its_classes():
    cfg = ModelConfig(features=[{"name": "x"}], task="multiclass", classes=["a", "b", "c", "d"])
    estimator = _fit(cfg, _multiclass(4000, 21))
    window = _multiclass(4000, 22)
    random_share = label_selection(_keep_labels(window, np.random.default_rng(2).uniform(size=4000) < 0.3),
                                   cfg, estimator)
    assert random_share is not None and not random_share.chosen
    one_class = (window["prediction"] == 0).to_numpy() | (np.random.default_rng(3).uniform(size=4000) < 0.05)
    found = label_selection(_keep_labels(window, one_class), cfg, estimator)
    assert found is not None and found.chosen and found.class_distance is not None and found.class_distance > 0.5
    assert set(found.shift) == {"accuracy", "roc_auc", "macro_f1"}


def test_a_regression_window_labelled_only_above_a_prediction_moves_the_mae_bar():
    from tests.support.estimation_data import FEATURES, regression_data
    cfg = ModelConfig(features=FEATURES, task="regression")
    frame = regression_data(6000, 31)
    rng = np.random.default_rng(1)
    frame["score"] = frame["label"] + rng.normal(0, 1.0, len(frame)) * (0.3 + np.abs(frame["x0"]))
    frame["prediction"] = frame["score"]
    frame["ts"] = pd.date_range("2026-01-01", periods=len(frame), freq="s", tz="UTC")
    estimator = _fit(cfg, frame.iloc[:3000])
    window = frame.iloc[3000:].reset_index(drop=True)
    chosen = (window["x0"].abs() > 1.0).to_numpy() | (rng.uniform(size=len(window)) < 0.05)
    window = _keep_labels(window, chosen)
    found = label_selection(window, cfg, estimator)
    assert found is not None and found.chosen, found
    # The rows reviewed are the noisy ones: the MAE bar rises towards what they realise.
    realised = float((window["label"] - window["score"]).abs().mean())
    on_all = float((frame.iloc[3000:]["label"] - frame.iloc[3000:]["score"]).abs().mean())
    assert found.shift["mae"] > 0.3 * (realised - on_all) > 0, (found.shift, realised, on_all)
    assert found.shift["rmse"] > 0
