"""Many-level categorical features: tested on their most frequent levels, the rest folded into one
``(other)`` level (monitor/drift/levels.py), through the real check and Evidently."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from monitor.config import DriftConfig, FeatureSpec, ModelConfig
from monitor.drift import evaluate_window
from monitor.drift.levels import MIN_KEPT_LEVELS, OTHER, fold_levels, kept_levels

CFG = ModelConfig(name="m", features=[FeatureSpec(name="x"), FeatureSpec(name="merchant", type="categorical")])


def _frame(n: int, seed: int, levels: int, *, zipf: float = 0.0, new_share: float = 0.0,
           shuffled: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, levels + 1) ** zipf
    p /= p.sum()
    if shuffled:  # the same frequencies on other levels: the popular merchants are others now
        p = p[np.random.default_rng(7).permutation(levels)]
    names = np.array([f"m{v}" for v in range(levels)], dtype=object)[rng.choice(levels, size=n, p=p)]
    new = rng.uniform(size=n) < new_share
    names[new] = np.array([f"new{v}" for v in range(20)], dtype=object)[rng.integers(0, 20, int(new.sum()))]
    frame = pd.DataFrame({"x": rng.normal(size=n), "merchant": names})
    frame["score"] = 1 / (1 + np.exp(-frame["x"]))
    return frame


def _merchant(ref: pd.DataFrame, cur: pd.DataFrame):
    result = evaluate_window(ref, cur, CFG, DriftConfig(), {})
    return next(f for f in result.features if f.name == "merchant")


@pytest.mark.parametrize("levels, zipf, rows", [(400, 0.8, 500), (400, 0.8, 5000), (1000, 0.0, 20000),
                                                (100_000, 0.0, 20000)])
def test_a_many_level_column_that_did_not_change_is_not_drifted(levels, zipf, rows):
    """Before folding a 400-level merchant read 0.14-0.36 on every check of a stream that never
    changed, and a 100,000-level id 0.76 (and took 50 s a check)."""
    reference = _frame(6000 if rows < 20000 else rows, 1, levels, zipf=zipf)
    merchant = _merchant(reference, _frame(rows, 2, levels, zipf=zipf))
    assert merchant.method == "jensenshannon" and not merchant.drifted, merchant
    assert merchant.score < 0.075, merchant   # the floor is kept under half the threshold, noise on top
    folded = merchant.details["folded"]
    assert folded["levels"] > folded["kept_levels"] and folded["other_level"] == OTHER


def test_the_summary_page_says_a_column_was_folded():
    from monitor.drift.summary import summary_html
    result = evaluate_window(_frame(6000, 1, 400, zipf=0.8), _frame(5000, 2, 400, zipf=0.8), CFG, DriftConfig(), {})
    page = summary_html(result)
    assert "folded: levels=400, kept_levels=" in page and "other_level=(other)" in page


@pytest.mark.parametrize("change", ["new", "shuffled"])
def test_a_many_level_column_that_changed_is_drifted(change):
    """New merchants on 15 % of the rows, or the same popularity on other merchants: drifted."""
    ref = _frame(6000, 1, 400, zipf=0.8)
    cur = _frame(5000, 2, 400, zipf=0.8, new_share=0.15 if change == "new" else 0.0, shuffled=change == "shuffled")
    merchant = _merchant(ref, cur)
    assert merchant.drifted and merchant.score >= 0.1, merchant
    assert merchant.details["folded"]["levels"] == 400 + 20 * (change == "new")


def test_few_levels_are_left_as_they_are():
    ref, cur = _frame(6000, 1, 12), _frame(500, 2, 12)
    merchant = _merchant(ref, cur)
    assert merchant.details is None
    same_ref, same_cur, folded = fold_levels(ref, cur, ["merchant"])
    assert folded == {} and same_ref is ref and same_cur is cur


def test_folding_keeps_missing_values_and_the_frequent_levels_of_both_sides():
    ref = pd.DataFrame({"c": ["a"] * 50 + ["b"] * 30 + [f"r{i}" for i in range(200)] + [None] * 5})
    cur = pd.DataFrame({"c": ["a"] * 40 + ["z"] * 40 + [f"q{i}" for i in range(100)] + [None] * 3})
    out_ref, out_cur, folded = fold_levels(ref, cur, ["c"])
    assert kept_levels(280, 180) == MIN_KEPT_LEVELS
    assert set(out_cur["c"].dropna()) == {"a", "z", OTHER} and set(out_ref["c"].dropna()) == {"a", "b", OTHER}
    assert out_ref["c"].isna().sum() == 5 and out_cur["c"].isna().sum() == 3
    f = folded["c"]
    assert f.kept == 3 and f.levels == 303   # a, b, z (10+ rows together); the one-row ids fold
    assert f.other_reference == pytest.approx(200 / 280) and f.other_current == pytest.approx(100 / 180)
    assert ref["c"].iloc[-1] is None and "r0" in set(ref["c"])  # the caller's frames are untouched


def _many_classes(n: int, seed: int, k: int, *, window: bool, shift: bool = False) -> pd.DataFrame:
    """A ``k``-class model's rows (Zipf-like priors; ``shift``: the three most frequent classes
    swap their shares with three rare ones): a reference sample, or a store window."""
    from monitor.tasks import internal_proba_columns
    rng = np.random.default_rng(seed)
    priors = 1.0 / np.arange(1, k + 1) ** 0.7
    if shift:
        priors[[0, 1, 2, k - 3, k - 2, k - 1]] = priors[[k - 3, k - 2, k - 1, 0, 1, 2]]
    y = rng.choice(k, size=n, p=priors / priors.sum())
    logits = rng.standard_normal((n, k))
    logits[np.arange(n), y] += 3.0
    proba = np.exp(logits - logits.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    columns = {"x": rng.standard_normal(n), "score": proba.max(axis=1),
               **dict(zip(internal_proba_columns(k), proba.T)),
               "label": y if not window else pd.array(y, dtype="Int64")}
    if window:
        columns["prediction"] = pd.array(proba.argmax(axis=1), dtype="Int64")
    return pd.DataFrame(columns)


def test_a_label_of_many_classes_is_folded_for_its_drift_test_and_its_figures_are_not():
    """60 classes, 500 labelled rows against a 5,000-row reference: the label's Jensen-Shannon
    distance read 0.100 with nothing changed, drifted at the default 0.1. The label is tested folded, on a copy: the
    accuracy is the unfolded one, and a shift of the frequent classes still drifts."""
    k = 60
    cfg = ModelConfig(name="many", task="multiclass", classes=[f"c{i}" for i in range(k)], features=[{"name": "x"}])
    ref = _many_classes(5000, 1, k, window=False)
    same = evaluate_window(ref, _many_classes(500, 2, k, window=True), cfg, DriftConfig(), {})
    label = same.label_drift
    assert label is not None and not label.drifted, label
    folded = (label.details or {}).get("folded")
    assert folded is not None and folded["levels"] == k and folded["kept_levels"] < k, label
    window = _many_classes(500, 2, k, window=True)
    assert same.accuracy == pytest.approx(float((window["prediction"] == window["label"]).mean()))
    moved = evaluate_window(ref, _many_classes(500, 3, k, window=True, shift=True), cfg, DriftConfig(), {})
    assert moved.label_drift is not None and moved.label_drift.drifted, moved.label_drift
    few = ModelConfig(name="few", task="multiclass", classes=[f"c{i}" for i in range(12)], features=[{"name": "x"}])
    small = evaluate_window(_many_classes(5000, 1, 12, window=False), _many_classes(500, 2, 12, window=True),
                            few, DriftConfig(), {})
    assert small.label_drift is not None and small.label_drift.details is None   # 12 classes: as they are
