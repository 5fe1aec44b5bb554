"""Label-starved streams (labels for a share of rows, or late): performance is judged by the labelled
rows there are. A drop the accuracy (regression: MAE) interval proves is a breach before
drift.min_labels rows; a window of drift.window_size rows that holds too few labels reaches back
until it holds min_labels of them. Real store (SQLite) for the window; the policy is pure."""
from __future__ import annotations

import numpy as np
import pandas as pd

from monitor.config import AlertsConfig, DriftConfig
from monitor.daemon.runtime.checks import CheckJob
from monitor.daemon.decisions.policy import AlertPolicy, Observation

BAR = dict(baseline_accuracy=0.85, baseline_roc_auc=0.92, champion_version="2")


def _policy(**drift):
    return AlertPolicy(AlertsConfig(), min_labels=1000, drift=DriftConfig(**drift))


def test_a_drop_its_interval_proves_is_judged_before_min_labels_and_nothing_else_is():
    # 300 labelled rows at 0.70: the interval's upper end (0.75) is still 10 points under the bar.
    proven = _policy().observe(Observation(labelled_rows=300, accuracy=0.70, accuracy_upper=0.75, **BAR))
    assert proven.performance_known and proven.fire and proven.retrain and proven.reason == "accuracy"
    assert proven.labels == (300, 1000)  # judged on fewer labelled rows than drift.min_labels
    assert proven.healthy_for("performance") is False
    # The same point with an interval reaching the bar's threshold: unknown, and never "healthy".
    straddles = _policy().observe(Observation(labelled_rows=300, accuracy=0.80, accuracy_upper=0.83, **BAR))
    assert not straddles.performance_known and not straddles.fire
    healthy_looking = _policy().observe(Observation(labelled_rows=300, accuracy=0.86, accuracy_upper=0.90, **BAR))
    assert healthy_looking.healthy_for("performance") is None
    # Too few labelled rows (drift.fast_min_rows), or the option off: unknown as before.
    assert not _policy().observe(Observation(labelled_rows=150, accuracy=0.5, accuracy_upper=0.6, **BAR)).fire
    off = _policy(judge_by_interval=False).observe(Observation(labelled_rows=300, accuracy=0.7, accuracy_upper=0.75,
                                                               **BAR))
    assert not off.performance_known


def test_regression_takes_the_same_path_with_the_mae_interval():
    bar = dict(baseline_mae=10.0, champion_version="2", task="regression")
    v = _policy().observe(Observation(labelled_rows=400, mae=13.0, mae_lower=11.5, **bar))
    assert v.fire and v.reason == "mae"
    assert not _policy().observe(Observation(labelled_rows=400, mae=11.5, mae_lower=10.5, **bar)).performance_known


def _rows(n: int, start: float, seed: int) -> pd.DataFrame:
    from trainer.synthetic import make_dataset
    df = make_dataset(n, seed=seed)
    df["score"] = np.random.default_rng(seed).uniform(size=n)
    df["id"] = [f"r{seed}-{i}" for i in range(n)]
    df["ts"] = start + np.arange(n) * 0.5
    return df


def test_a_window_short_of_labels_reaches_back_until_it_holds_min_labels(make_config):
    from monitor.store import PredictionStore
    cfg = make_config({"drift": {"window_size": 1000, "min_labels": 400, "max_window_rows": 5000}},
                      with_champion=False)
    with PredictionStore.from_config(cfg) as store:
        df = _rows(4000, 1_700_000_000.0, 3)
        store.add_predictions(df.drop(columns=["label"]))
        store.add_labels(df[["id", "label", "ts"]].iloc[::5])   # labels for 20 % of rows
        job = CheckJob(cfg, store, None, None, None)  # type: ignore[arg-type]  # only the window is read
        window = job.current_window()
        labelled = int(window["label"].notna().sum())
        assert labelled == 400 and 1990 <= len(window) <= 2000, (len(window), labelled)
        assert window["ts"].iloc[-1].timestamp() == df["ts"].iloc[-1]   # still ends at the newest row
        assert len(job.current_window(labelled_only=True)) == 800   # every labelled row: fewer than window_size
        capped = make_config({"drift": {"window_size": 1000, "min_labels": 400, "max_window_rows": 1500}},
                             with_champion=False)
        assert len(CheckJob(capped, store, None, None, None).current_window()) == 1500  # type: ignore[arg-type]
        plain = make_config({"drift": {"window_size": 1000, "min_labels": 400, "labelled_window": False}},
                            with_champion=False)
        assert len(CheckJob(plain, store, None, None, None).current_window()) == 1000  # type: ignore[arg-type]


def _served(n: int, accuracy: float, seed: int = 0) -> pd.DataFrame:
    """``n`` labelled binary rows whose served prediction is right on ``accuracy`` of them."""
    rng = np.random.default_rng(seed)
    label = rng.integers(0, 2, n)
    right = np.arange(n) < round(accuracy * n)
    pred = np.where(right, label, 1 - label)
    return pd.DataFrame({"label": label, "prediction": pred, "score": np.where(pred == 1, 0.8, 0.2)})


def test_the_wait_after_a_change_point_is_sized_by_the_drop_the_rows_prove():
    """training.post_change_rows (1,000 at the defaults) is what a small gain needs before the gate
    can tell it from chance; a large proven drop needs a few hundred, a small one keeps the count."""
    from monitor.config import DriftloopConfig
    from monitor.daemon.decisions.post_change import post_change_need
    cfg = DriftloopConfig()
    full = cfg.training.post_change_rows
    level = {"reference_accuracy": 0.90}
    large = post_change_need(cfg, _served(200, 0.55), level)     # a 35-point drop in 200 labelled rows
    assert cfg.training.min_rows <= large < full / 2
    assert large == -(-100 // cfg.training.holdout_fraction)      # the 100 held-out rows' floor
    assert post_change_need(cfg, _served(200, 0.86), level) == full     # not proven past the bar
    assert post_change_need(cfg, _served(200, 0.55), None) == full      # no reference level yet
    assert post_change_need(cfg, _served(20, 0.10), level) == full      # too few rows to say
    medium = post_change_need(cfg, _served(400, 0.80), level)    # 10 points: between the two
    assert large < medium <= full
    pinned = DriftloopConfig(training={"min_post_change_rows": 700})
    assert post_change_need(pinned, _served(200, 0.55), level) == 700
