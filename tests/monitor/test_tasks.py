"""The task seam (monitor.tasks, monitor.taskstats): inference from a target, records per task
through the validator and a real store, and the per-task figures against scikit-learn."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import (accuracy_score, f1_score, mean_absolute_error, mean_squared_error, precision_score,
                             r2_score, recall_score, roc_auc_score)

from monitor.config import ModelConfig
from monitor.drift.frames import labelled_rows, scored_rows
from monitor.errors import ValidationError
from monitor.store.store import PredictionStore
from monitor.tasks import class_codes, infer_task, task_of
from monitor.taskstats import multiclass_performance, regression_performance

CLASSES = ["cat", "dog", "emu"]


def _multiclass() -> ModelConfig:
    return ModelConfig(name="mc", task="multiclass", classes=CLASSES,
                       features=[{"name": "x"}, {"name": "c", "type": "categorical"}])


def _regression() -> ModelConfig:
    return ModelConfig(name="rg", task="regression", features=[{"name": "x"}])


# ---- inference -----------------------------------------------------------------------------------
@pytest.mark.parametrize("values, task, classes", [
    ([0, 1, 1, 0], "binary", None),
    ([True, False, True], "binary", None),
    (["no", "yes", "yes"], "binary", ["no", "yes"]),
    (["a", "b", "c", "a"], "multiclass", ["a", "b", "c"]),
    (list(range(10)) * 3, "multiclass", [str(i) for i in range(10)]),
    ([0.5, 1.25, 3.0, 7.75], "regression", None),
    (list(range(50)), "regression", None),          # integers with many values: a quantity
])
def test_infer_task(values, task, classes):
    found = infer_task(pd.Series(values, name="y"))
    assert not isinstance(found, str)
    assert (found.task, found.classes) == (task, classes)
    assert found.reason


def test_infer_task_refuses_unusable_targets():
    assert "single value" in infer_task(pd.Series([3, 3, 3], name="y"))  # type: ignore[operator]
    assert "more than 100" in infer_task(pd.Series([f"c{i}" for i in range(150)], name="y"))  # type: ignore[operator]


def test_class_codes_take_names_and_equal_numbers():
    codes, bad = class_codes(["dog", 1, 1.0, "2", "eel", None], ["0", "1", "2", "dog"])
    assert codes.tolist() == [3, 1, 1, 2, -1, -1]
    assert bad == [4, 5]


def test_config_checks_classes_against_the_task():
    with pytest.raises(ValueError, match="regression model has none"):
        ModelConfig(task="regression", classes=["a", "b"])
    with pytest.raises(ValueError, match="two classes"):
        ModelConfig(task="binary", classes=["a", "b", "c"])
    with pytest.raises(ValueError, match="must not repeat"):
        ModelConfig(task="multiclass", classes=["a", "a", "b"])


# ---- records through a real store ----------------------------------------------------------------
def test_multiclass_records_round_trip_through_the_store():
    store = PredictionStore("sqlite://", _multiclass())
    store.add_predictions([
        {"id": "a", "features": {"x": 1, "c": "u"}, "probabilities": {"cat": 0.2, "dog": 0.7, "emu": 0.1}},
        {"id": "b", "features": {"x": 2, "c": "v"}, "probabilities": [0.5, 0.3, 0.2], "prediction": "dog"},
    ])
    store.add_labels([{"id": "a", "label": "dog"}, {"id": "b", "label": "emu"}])
    window = store.window(last_n=10)
    rows = labelled_rows(window, store.model, "window")
    assert rows is not None
    assert rows.y.tolist() == [1, 2]
    assert rows.pred.tolist() == [1, 1]            # a: most probable class; b: the class it was served
    assert rows.score.tolist() == [0.7, 0.3]       # the served class's probability
    assert rows.proba is not None and rows.proba.shape == (2, 3)
    assert rows.loss("multiclass").tolist() == [0.0, 1.0]


@pytest.mark.parametrize("record, field, words", [
    ({"probabilities": {"cat": 0.2, "dog": 0.7, "eel": 0.1}}, "probabilities", "unknown class"),
    ({"probabilities": {"cat": 0.3, "dog": 0.7}}, "probabilities", "missing class"),
    ({"probabilities": [0.2, 0.2, 0.2]}, "probabilities", "sum to 0.6000"),
    ({"probabilities": [0.5, 0.5]}, "probabilities", "expected 3 probabilities"),
    ({"probabilities": [0.2, 0.7, 0.1], "prediction": "eel"}, "prediction", "unknown class"),
    ({"probabilities": [1.2, -0.1, -0.1]}, "probabilities", "class 'cat'"),
    ({"score": 0.5}, "probabilities", "required"),
])
def test_bad_multiclass_predictions_name_the_record_and_field(record, field, words):
    store = PredictionStore("sqlite://", _multiclass())
    good = {"id": "ok", "features": {"x": 1, "c": "u"}, "probabilities": [0.2, 0.7, 0.1]}
    with pytest.raises(ValidationError) as exc:
        store.add_predictions([good, {"id": "bad", "features": {"x": 1, "c": "u"}, **record}])
    errors = exc.value.errors
    assert any(e["index"] == 1 and e["field"] == field and words in e["message"] for e in errors), errors
    assert len(store.window(last_n=10)) == 0   # the batch is stored whole or not at all


def test_multiclass_label_of_an_unknown_class_is_refused():
    store = PredictionStore("sqlite://", _multiclass())
    with pytest.raises(ValidationError) as exc:
        store.add_labels([{"id": "a", "label": "cat"}, {"id": "b", "label": "eel"}])
    assert exc.value.errors[0]["index"] == 1 and "unknown class 'eel'" in exc.value.errors[0]["message"]


def test_regression_records_round_trip_and_refuse_text():
    store = PredictionStore("sqlite://", _regression())
    store.add_predictions([{"id": "a", "features": {"x": 1}, "prediction": 12.5},
                           {"id": "b", "features": {"x": 2}, "prediction": 7}])
    store.add_labels([{"id": "a", "label": 13.25}, {"id": "b", "label": 5}])
    rows = labelled_rows(store.window(last_n=10), store.model, "window")
    assert rows is not None
    assert rows.y.tolist() == [13.25, 5.0] and rows.pred.tolist() == [12.5, 7.0]
    assert rows.loss("regression").tolist() == [0.75, 2.0]
    scored = scored_rows(store.window(last_n=10), store.model, "window")
    assert scored is not None and scored.pred.tolist() == [12.5, 7.0]
    with pytest.raises(ValidationError) as exc:
        store.add_predictions([{"id": "c", "features": {"x": 1}, "prediction": "high"}])
    assert exc.value.errors[0]["field"] == "prediction"
    with pytest.raises(ValidationError) as exc:
        store.add_labels([{"id": "c", "label": "high"}])
    assert exc.value.errors[0]["field"] == "label"


def test_a_binary_model_with_named_classes_takes_names_or_0_1():
    model = ModelConfig(name="yn", classes=["no", "yes"], features=[{"name": "x"}])
    store = PredictionStore("sqlite://", model)
    store.add_predictions([{"id": "a", "features": {"x": 1}, "score": 0.9, "prediction": "yes"},
                           {"id": "b", "features": {"x": 1}, "score": 0.2}])
    store.add_labels([{"id": "a", "label": "yes"}, {"id": "b", "label": 0}])
    rows = labelled_rows(store.window(last_n=10), model, "window")
    assert rows is not None and rows.y.tolist() == [1, 0] and rows.pred.tolist() == [1, 0]


def test_a_store_refuses_a_model_of_another_task_on_its_tables(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    PredictionStore(url, ModelConfig(name="m", features=[{"name": "x"}]))
    with pytest.raises(Exception, match="use a new model.name"):
        PredictionStore(url, ModelConfig(name="m", task="regression", features=[{"name": "x"}]))


# ---- figures against scikit-learn ----------------------------------------------------------------
def test_multiclass_figures_match_scikit_learn():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, size=2000)
    logits = rng.normal(size=(2000, 4)) + 1.5 * np.eye(4)[y]
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    pred = proba.argmax(axis=1)
    perf = multiclass_performance(y, pred, proba, 4)
    assert perf.accuracy == pytest.approx(accuracy_score(y, pred))
    assert perf.roc_auc == pytest.approx(roc_auc_score(y, proba, multi_class="ovr", average="macro"))
    assert perf.macro_f1 == pytest.approx(f1_score(y, pred, average="macro"))
    assert perf.weighted_f1 == pytest.approx(f1_score(y, pred, average="weighted"))
    assert perf.class_recall is not None and perf.class_precision is not None
    assert [perf.class_recall[k] for k in range(4)] == pytest.approx(recall_score(y, pred, average=None))
    assert [perf.class_precision[k] for k in range(4)] == pytest.approx(precision_score(y, pred, average=None))
    lo, hi = perf.roc_auc_ci  # type: ignore[misc]
    assert lo < perf.roc_auc < hi and hi - lo < 0.05


def test_regression_figures_match_scikit_learn_and_intervals_cover():
    rng = np.random.default_rng(1)
    covered = {"mae": 0, "rmse": 0, "r2": 0}
    x = rng.normal(size=200_000)
    truth_y = 3 * x + rng.normal(0, 1, size=len(x))
    truth = {"mae": np.sqrt(2 / np.pi), "rmse": 1.0, "r2": 1 - 1 / truth_y.var()}
    for _ in range(200):
        xs = rng.normal(size=500)
        y = 3 * xs + rng.normal(0, 1, size=500)
        perf = regression_performance(y, 3 * xs)
        for name in covered:
            lo, hi = getattr(perf, f"{name}_ci")
            covered[name] += lo <= truth[name] <= hi
    assert all(c >= 180 for c in covered.values()), covered   # ~95 % nominal
    y = rng.normal(10, 2, size=1000)
    pred = y + rng.normal(0, 1, size=1000)
    perf = regression_performance(y, pred)
    assert perf.mae == pytest.approx(mean_absolute_error(y, pred))
    assert perf.rmse == pytest.approx(mean_squared_error(y, pred) ** 0.5)
    assert perf.r2 == pytest.approx(r2_score(y, pred))
    assert perf.mape is not None
    assert regression_performance(np.array([0.0, 1.0]), np.array([0.5, 1.0])).mape is None
    assert regression_performance(-y, -pred).mape == pytest.approx(perf.mape)  # all negative: one sign


def test_no_mape_for_targets_that_cross_zero():
    """A percentage of values near 0 swings by multiples between samples of one unchanged model:
    the MAPE of a target that crosses 0 is absent, and so no rule can breach on it."""
    rng = np.random.default_rng(3)
    mapes = []
    for _ in range(20):  # windows of one stationary regressor, target mean 1, sd 1
        y = rng.normal(1, 1, size=500)
        pred = y + rng.normal(0, 0.3, size=500)
        assert regression_performance(y, pred).mape is None
        mapes.append(float((np.abs(pred - y) / np.abs(y)).mean()))
    assert max(mapes) / min(mapes) > 1.5  # what it would have read: a 50 %+ "rise" with nothing changed


def test_per_row_loss():
    assert task_of("multiclass").per_row_loss(np.array([0, 2]), np.array([0, 1])).tolist() == [0.0, 1.0]
    assert task_of("regression").per_row_loss(np.array([1.0, 2.0]), np.array([1.5, 0.0])).tolist() == [0.5, 2.0]
