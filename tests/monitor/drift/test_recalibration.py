"""The estimate judged on labelled rows against its own band, and refitted there: real frames, real
isotonic calibration (binary, multiclass) and real loss models (regression), one code path."""
from __future__ import annotations

import numpy as np
import pandas as pd

from monitor.config import ModelConfig
from monitor.drift.estimators import fit_estimator
from monitor.drift.frames import labelled_rows
from monitor.drift.recalibration import figure_of, labelled_estimate, refit

BINARY = ModelConfig(features=[{"name": "x"}], task="binary")


def _binary(n: int, seed: int, lift: float = 0.0) -> pd.DataFrame:
    """Scores s; labels drawn with P(y=1 | s) = s moved ``lift`` away from 0.5 (clipped): ``lift`` > 0
    makes the model look better than it is on these rows (a skewed calibration sample)."""
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.0, 1.0, n)
    p = np.clip(s + lift * np.sign(s - 0.5), 0.0, 1.0)
    return pd.DataFrame({"x": rng.standard_normal(n), "score": s, "prediction": (s > 0.5).astype(int),
                         "label": (rng.uniform(size=n) < p).astype(int)})


def _fit(cfg: ModelConfig, frame: pd.DataFrame):
    return fit_estimator(cfg, frame, labelled_rows(frame, cfg, "reference"))


def test_skewed_calibration_is_outside_its_band_and_a_refit_on_labelled_rows_is_inside():
    skewed = _fit(BINARY, _binary(3000, 1, lift=0.25))   # fitted where the model was far more right
    window = _binary(1500, 2)
    judged = labelled_estimate(skewed, window, BINARY)
    assert judged is not None and judged.figure == "accuracy" and judged.rows == 1500
    assert judged.estimated - judged.realised > 0.1 and not judged.inside, judged.describe()
    fresh = refit(BINARY, _binary(1500, 3))                # the champion's recent labelled rows
    after = labelled_estimate(fresh, _binary(1500, 4), BINARY)
    assert after is not None and after.inside and abs(after.error) < 0.03, after.describe()


def test_unlabelled_rows_are_left_out_and_no_estimator_or_labels_judge_nothing():
    window = _binary(1000, 5)
    window.loc[window.index[:600], "label"] = None
    fresh = refit(BINARY, _binary(1500, 6))
    judged = labelled_estimate(fresh, window, BINARY)
    assert judged is not None and judged.rows == 400
    assert labelled_estimate(None, window, BINARY) is None
    assert labelled_estimate(fresh, window.assign(label=None), BINARY) is None
    assert refit(BINARY, _binary(50, 7)) is None   # too few rows to calibrate (MIN_CALIBRATION_ROWS)


def _multiclass(n: int, seed: int, label_noise: float = 0.0) -> pd.DataFrame:
    """A store window of a calibrated 4-class model (labels drawn from its probabilities);
    ``label_noise``: that share of labels replaced by a random class (the model is then less right
    than its probabilities say)."""
    from monitor.tasks import internal_proba_columns
    rng = np.random.default_rng(seed)
    logits = 2.0 * rng.standard_normal((n, 4))
    proba = np.exp(logits - logits.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    label = (rng.uniform(size=(n, 1)) > np.cumsum(proba, axis=1)).sum(axis=1).clip(0, 3)
    flip = rng.uniform(size=n) < label_noise
    label[flip] = rng.integers(0, 4, int(flip.sum()))
    out = pd.DataFrame({"x": rng.standard_normal(n), "label": label, "prediction": proba.argmax(axis=1),
                        "score": proba.max(axis=1)})
    for column, values in zip(internal_proba_columns(4), proba.T):
        out[column] = values
    return out


def test_multiclass_and_regression_take_the_same_path():
    from tests.support.estimation_data import FEATURES, regression_data
    assert figure_of("multiclass") == "accuracy" and figure_of("regression") == "mae"
    mc = ModelConfig(features=[{"name": "x"}], task="multiclass", classes=["a", "b", "c", "d"])
    judged = labelled_estimate(refit(mc, _multiclass(2000, 11)), _multiclass(1500, 12), mc)
    assert judged is not None and judged.figure == "accuracy" and judged.inside, judged.describe()
    off = labelled_estimate(refit(mc, _multiclass(2000, 11)), _multiclass(1500, 13, label_noise=0.35), mc)
    assert off is not None and not off.inside and off.error < -0.1, off.describe()
    again = labelled_estimate(refit(mc, _multiclass(1500, 14, label_noise=0.35)),
                              _multiclass(1500, 13, label_noise=0.35), mc)
    assert again is not None and again.inside, again.describe()

    reg = ModelConfig(features=FEATURES, task="regression")
    frame = regression_data(2400, 21)
    frame["score"] = frame["label"] + np.random.default_rng(1).normal(0, 1.0, len(frame))
    frame["prediction"] = frame["score"]
    estimator = refit(reg, frame.iloc[:1600])
    judged = labelled_estimate(estimator, frame.iloc[1600:], reg)
    assert judged is not None and judged.figure == "mae" and judged.inside, judged.describe()
    worse = frame.iloc[1600:].copy()
    worse["score"] = worse["label"] + np.random.default_rng(2).normal(0, 3.0, len(worse))
    off = labelled_estimate(estimator, worse, reg)
    assert off is not None and not off.inside and off.error > 0.5, off.describe()
