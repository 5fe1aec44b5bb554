"""Training data per task (trainer/data.py): the target read as 0/1, class indices or numbers, bad
targets named by column, count and row, splits per task, tensors per task."""
from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
import torch

from monitor.config import load_config
from monitor.errors import DataError
from monitor.tasks import internal_proba_columns
from tests.trainer.task_data import CLASSES, multiclass_rows, regression_rows
from trainer.build import build_model
from trainer.data import check_frame, split, tensors
from trainer.synthetic import make_dataset


def model_cfg(task: str, classes=None):
    model = {"task": task, **({"classes": classes} if classes else {})}
    return load_config(path=None, environ={}, overrides={"model": model}).model


MULTI = model_cfg("multiclass", CLASSES)
REGRESSION = model_cfg("regression")


def test_multiclass_names_and_numbers_become_indices():
    rows = multiclass_rows(200, seed=1, names=True)
    out = check_frame(rows, MULTI)
    assert out["label"].dtype == np.int64
    assert out["label"].tolist() == [CLASSES.index(c) for c in rows["label"]]
    numbered = model_cfg("multiclass", ["3", "5", "7"])
    y = check_frame(make_dataset(30, seed=0).assign(label=[3, 5.0, "7"] * 10), numbered)["label"]
    assert y.tolist()[:3] == [0, 1, 2]


def test_a_store_window_or_reference_sample_holds_class_indices():
    """With a __proba_<i> column per class the frame is internal: its target is read as indices."""
    rows = multiclass_rows(100, seed=2)  # label: indices 0-4
    window = rows.assign(score=0.5, prediction=0, **{c: 0.2 for c in internal_proba_columns(5)})
    assert check_frame(window, MULTI)["label"].tolist() == rows["label"].tolist()
    with pytest.raises(DataError, match="not known classes"):
        check_frame(rows, MULTI)  # a file: 0-4 are not class names
    bad = window.assign(label=window["label"].where(window.index != 7, 9))
    with pytest.raises(DataError, match=r"1 value\(s\) that are not known class indices \(first at row 7: 9\)"):
        check_frame(bad, MULTI)


def test_an_unknown_class_names_the_column_count_first_row_and_the_classes():
    rows = multiclass_rows(100, seed=3, names=True)
    rows.loc[[4, 40], "label"] = "yak"
    rows.loc[50, "label"] = None
    with pytest.raises(DataError) as err:
        check_frame(rows, MULTI, what="recent window")
    message = str(err.value)
    assert message.startswith("recent window: target 'label' has 3 value(s)")
    assert "first at row 4: 'yak'" in message and "ant, bee, cat, dog, eel" in message


def test_a_multiclass_target_needs_two_classes():
    with pytest.raises(DataError, match="single class"):
        check_frame(multiclass_rows(50, seed=0, names=True).assign(label="bee"), MULTI)


@pytest.mark.parametrize("value, shown", [("cheap", "'cheap'"), (np.inf, "inf"), (None, "None")])
def test_a_regression_target_must_be_finite_numbers(value, shown):
    rows = regression_rows(60, seed=0)
    rows["label"] = rows["label"].astype(object)
    rows.loc[11, "label"] = value
    with pytest.raises(DataError) as err:
        check_frame(rows, REGRESSION)
    assert "target 'label' of a regression model has 1 value(s)" in str(err.value)
    assert f"first at row 11: {shown}" in str(err.value)
    with pytest.raises(DataError, match="single value"):
        check_frame(rows.assign(label=3.0), REGRESSION)


def test_regression_target_is_float():
    out = check_frame(regression_rows(50, seed=0), REGRESSION)
    assert out["label"].dtype == np.float64


def test_binary_with_named_classes_reads_names_and_store_zero_one():
    named = model_cfg("binary", ["stay", "churn"])
    rows = make_dataset(80, seed=0)
    as_names = rows.assign(label=np.where(rows["label"] == 1, "churn", "stay"))
    assert check_frame(as_names, named)["label"].tolist() == rows["label"].tolist()
    assert check_frame(rows, named)["label"].tolist() == rows["label"].tolist()  # a store window: 0/1
    with pytest.raises(DataError, match="not known classes"):
        check_frame(as_names.assign(label=as_names["label"].where(as_names.index != 5, "maybe")), named)


def test_multiclass_split_is_stratified_and_keeps_a_rare_class_on_the_training_side(caplog):
    clean = check_frame(multiclass_rows(600, seed=4, names=True), MULTI)
    rest, held = split(clean, 0.3, "label", seed=1, task="multiclass")
    assert len(rest) + len(held) == len(clean)
    for k in range(5):
        share = (held["label"] == k).mean() - (clean["label"] == k).mean()
        assert abs(share) < 0.02
    rare = pd.concat([clean[clean.label != 4], clean[clean.label == 4].head(1)], ignore_index=True)
    with caplog.at_level(logging.WARNING, logger="trainer.data"):
        rest, held = split(rare, 0.3, "label", seed=1, what="recent window", part="holdout", task="multiclass")
    assert 4 in set(rest["label"]) and 4 not in set(held["label"])
    assert any("kept on the training side" in r.message for r in caplog.records)
    two = pd.concat([clean[clean.label == 0], clean[clean.label.isin([1, 2])].head(2)], ignore_index=True)
    with pytest.raises(DataError, match="too few rows to hold out a holdout set"):
        split(two, 0.3, "label", seed=1, part="holdout", task="multiclass")  # held out: class 0 alone


def test_regression_split_is_random_and_needs_both_sides():
    clean = check_frame(regression_rows(100, seed=0), REGRESSION)
    rest, held = split(clean, 0.3, "label", seed=1, task="regression")
    assert (len(rest), len(held)) == (70, 30)
    assert split(clean, 0.3, "label", seed=1, task="regression")[1].equals(held)
    with pytest.raises(DataError, match="too few rows"):
        split(clean.head(1), 0.3, "label", seed=1, task="regression")


def test_tensors_per_task():
    cfg = load_config(path=None, environ={}, overrides={"model": {"task": "multiclass", "classes": CLASSES}})
    rows = check_frame(multiclass_rows(100, seed=0, names=True), cfg.model)
    _, _, y = tensors(build_model(cfg, rows), rows, "label")
    assert y.dtype == torch.int64 and y.tolist() == rows["label"].tolist()
    cfg = load_config(path=None, environ={}, overrides={"model": {"task": "regression"}})
    rows = check_frame(regression_rows(200, seed=0), cfg.model)
    model = build_model(cfg, rows)
    _, _, y = tensors(model, rows, "label")
    assert y.dtype == torch.float32
    assert abs(float(y.mean())) < 1e-4 and float(y.std(unbiased=False)) == pytest.approx(1.0, abs=1e-4)
    assert float(model.target_mean) == pytest.approx(rows["label"].mean(), rel=1e-5)
