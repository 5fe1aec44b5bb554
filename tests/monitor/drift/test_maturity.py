"""Labels that arrive by outcome (monitor.drift.maturity): which rows' labels have matured.

A window as the store returns it (``ts``, ``label_ts``, target), labels arrived by the time of its
newest label; the delays are drawn per class."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from monitor.config import ModelConfig
from monitor.drift.maturity import label_maturity, mature_rows, withhold_immature

T0 = 1_790_000_000.0


def _window(rng: np.random.Generator, n: int, delay_of, *, spacing: float = 1.0,
            drifting_mix: bool = False) -> pd.DataFrame:
    """``n`` predictions a second apart, 30 % positives (``drifting_mix``: 5 % at the start to 80 %
    at the end); each label stamped ``delay_of(y)`` seconds after its prediction, and present only if
    it arrived by the time the last prediction was made."""
    ts = T0 + np.arange(n) * spacing
    share = np.linspace(0.05, 0.8, n) if drifting_mix else 0.3
    y = (rng.uniform(size=n) < share).astype(int)
    stamped = ts + delay_of(rng, y)
    now = ts[-1]
    arrived = stamped <= now
    return pd.DataFrame({
        "id": [f"r{i}" for i in range(n)],
        "ts": pd.to_datetime(ts, unit="s", utc=True),
        "score": rng.uniform(size=n),
        "prediction": pd.array(rng.integers(0, 2, n), dtype="Int64"),
        "label": pd.Series(y, dtype="Int64").where(arrived, pd.NA),
        "label_ts": pd.to_datetime(pd.Series(stamped), unit="s", utc=True).where(arrived),
    })


def _by_outcome(rng, y):   # positives within a minute, negatives after 10 to 20 minutes
    return np.where(y == 1, rng.uniform(5, 60, len(y)), rng.uniform(600, 1200, len(y)))


CFG = ModelConfig()


def test_class_dependent_delays_withhold_the_young_rows_so_the_judged_labels_are_not_skewed():
    frame = _window(np.random.default_rng(0), 5000, _by_outcome)
    labelled = frame["label"].notna()
    young = frame["ts"] > frame["ts"].iloc[-1] - pd.Timedelta(seconds=1200)
    # The young rows' labels are almost all positives: judged as they are, the labels read skewed.
    assert frame.loc[labelled & young, "label"].mean() > 0.6
    assert frame.loc[labelled & ~young, "label"].mean() == pytest.approx(0.3, abs=0.03)

    m = label_maturity(frame, CFG)
    assert m is not None
    assert m.delays["0"] == pytest.approx(1170, abs=30) and m.delays["1"] < 60
    assert m.horizon_seconds == m.delays["0"] and m.distance > 0.5 and m.medians["0"] > 10 * m.medians["1"]
    assert m.as_of == pytest.approx(frame["label_ts"].max().timestamp())

    kept = withhold_immature(frame, m, "label")
    assert len(kept) == len(frame) and kept["id"].tolist() == frame["id"].tolist()   # no row lost
    judged = kept["label"].notna()
    assert int((labelled & ~judged).sum()) == m.immature_rows > 300
    assert kept["label_ts"].notna().sum() == judged.sum()
    assert kept.loc[judged, "label"].mean() == pytest.approx(0.3, abs=0.03)   # the skew is gone
    assert (kept.loc[judged, "ts"] <= pd.Timestamp(m.cut, unit="s", tz="UTC")).all()

    learnt = mature_rows(frame[labelled].reset_index(drop=True), m)
    assert len(learnt) == judged.sum() and learnt["label"].mean() == pytest.approx(0.3, abs=0.03)
    assert "labels arrive by outcome" in m.describe() and "19.5 min" in m.describe()
    assert m.to_dict()["cut"] == m.cut


def _batch_jitter(rng, y):
    """Labels sent per batch of 500 rows, each batch's delay its own (30 s to 50 min), and the class
    mix drifting from 5 % to 80 % positives along the window: every class's labels take the same
    time, yet their delay distributions differ (the classes' rows sit in different batches)."""
    batch = np.arange(len(y)) // 500
    return rng.uniform(30, 3000, batch.max() + 1)[batch] + rng.uniform(0, 1, len(y))


@pytest.mark.parametrize("delay", [
    lambda rng, y: np.full(len(y), 900.0),                  # every label a quarter of an hour late
    lambda rng, y: rng.exponential(300.0, len(y)),          # late at random, whatever the outcome
    _batch_jitter,
])
def test_delays_that_do_not_depend_on_the_class_withhold_nothing(delay):
    jitter = delay is _batch_jitter
    frame = _window(np.random.default_rng(5 if jitter else 1), 5000, delay, drifting_mix=jitter)
    assert frame["label"].notna().sum() > 1000
    m = label_maturity(frame, CFG)
    assert m is None
    assert withhold_immature(frame, m, "label") is frame and mature_rows(frame, m) is frame


def test_nothing_to_compare_is_none():
    rng = np.random.default_rng(2)
    frame = _window(rng, 5000, _by_outcome)
    assert label_maturity(frame.drop(columns=["label_ts"]), CFG) is None       # a frame without label times
    assert label_maturity(frame.iloc[:0], CFG) is None
    only_positives = frame[frame["label"].fillna(1) == 1].reset_index(drop=True)
    assert label_maturity(only_positives, CFG) is None                        # one class: nothing to compare by
    regression = ModelConfig(task="regression")
    assert label_maturity(frame, regression) is None


def test_a_multiclass_window_with_one_slow_class():
    rng = np.random.default_rng(3)
    n = 6000
    frame = _window(rng, n, lambda rng, y: rng.uniform(5, 60, len(y)))
    y = rng.integers(0, 3, n)
    delay = np.where(y == 2, rng.uniform(600, 900, n), rng.uniform(5, 60, n))
    ts = frame["ts"].map(pd.Timestamp.timestamp).to_numpy()
    arrived = ts + delay <= ts[-1]
    frame["label"] = pd.Series(y, dtype="Int64").where(arrived, pd.NA)
    frame["label_ts"] = pd.to_datetime(pd.Series(ts + delay), unit="s", utc=True).where(arrived)
    cfg = ModelConfig(task="multiclass", classes=["a", "b", "c"])
    m = label_maturity(frame, cfg)
    assert m is not None and set(m.delays) == {"0", "1", "2"}
    assert m.horizon_seconds == m.delays["2"] > 800
    kept = withhold_immature(frame, m, "label")
    shares = kept["label"].dropna().value_counts(normalize=True)
    assert shares.min() > 0.28   # class 2 no longer under-represented among the judged labels
