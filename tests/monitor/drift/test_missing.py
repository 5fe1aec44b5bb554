"""A feature that goes missing is drift (monitor/drift/missing.py), on real checks of the demo data: an
upstream that breaks and sends one feature ``null`` in every row, or in 40 % of them, drifts that
feature whatever its values do; a few missing values, or the reference's own share, do not."""
from __future__ import annotations

import numpy as np
import pytest

from monitor.drift import evaluate_window
from monitor.drift.missing import METHOD, share_test
from tests.monitor.drift.conftest import window

BASELINE = {"accuracy": 0.8, "roc_auc": 0.85}


def broken(share: float, column: str = "x0", seed: int = 7, n: int = 2000):
    frame = window(n, seed=seed)
    rows = np.random.default_rng(seed).uniform(size=n) < share
    frame.loc[rows, column] = None
    return frame


def test_a_feature_gone_missing_altogether_is_drifted_not_untested(cfg, ref_frame):
    result = evaluate_window(ref_frame, broken(1.0), cfg.model, cfg.drift, BASELINE)
    x0 = result.feature("x0")
    assert x0.drifted and x0.method == METHOD and x0.skipped is None
    assert x0.score == pytest.approx(1.0) and x0.threshold == cfg.drift.missing_share_change
    assert x0.details["reference_missing_ratio"] == 0.0 and x0.details["current_missing_ratio"] == 1.0
    assert x0.details["values"]["skipped"] == "no values in the current window"  # what it said before
    assert result.drifted_features == ["x0"] and result.drift_share == pytest.approx(1 / 10)
    assert result.to_dict()["features"][0]["method"] == METHOD


def test_a_feature_missing_in_part_of_the_rows_is_drifted_while_its_values_look_stable(cfg, ref_frame):
    result = evaluate_window(ref_frame, broken(0.4, column="x3"), cfg.model, cfg.drift, BASELINE)
    x3 = result.feature("x3")
    assert x3.drifted and x3.method == METHOD and x3.score == pytest.approx(0.4, abs=0.04)
    assert x3.details["values"]["method"] == "wasserstein" and not x3.details["values"]["drifted"]
    # A few missing values, and the switch turned off, leave the value test's verdict.
    few = evaluate_window(ref_frame, broken(0.03, column="x3"), cfg.model, cfg.drift, BASELINE).feature("x3")
    assert few.method == "wasserstein" and not few.drifted
    off = cfg.drift.model_copy(update={"missing_share_change": 0.0})
    assert evaluate_window(ref_frame, broken(0.4, column="x3"), cfg.model, off, BASELINE).feature("x3").method == (
        "wasserstein")


def test_the_share_test_needs_evidence_not_only_a_large_change():
    assert share_test(0.0, 5000, 1.0, 2000) < 1e-12
    assert share_test(0.05, 5000, 0.05, 2000) == pytest.approx(1.0)
    assert share_test(0.0, 5000, 0.1, 10) > 1e-3     # 1 row of 10: no proof (a pooled z test: p 1e-110)
    assert share_test(0.0, 0, 1.0, 2000) == 1.0
