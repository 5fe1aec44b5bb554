"""The change-point scan on the per-row error stream, and the fast lane built on it."""
from __future__ import annotations

import numpy as np
import pytest

from monitor.drift.changepoint import fast_breach, find_change


def stream(rng, parts: list[tuple[int, float]]) -> np.ndarray:
    return np.concatenate([(rng.uniform(size=n) < acc).astype(int) for n, acc in parts])


def test_stationary_streams_show_no_change():
    rng = np.random.default_rng(0)
    found = [find_change(stream(rng, [(n, 0.9)])) for n in (300, 1000, 3000, 5000) for _ in range(50)]
    assert sum(f is not None for f in found) <= 2  # z >= 4 over a scan: well under 1 % by chance


@pytest.mark.parametrize("before, after", [(0.9, 0.5), (0.95, 0.75), (0.88, 0.80)])
def test_a_step_down_is_found_near_where_it_happened(before, after):
    rng = np.random.default_rng(1)
    found = find_change(stream(rng, [(2000, before), (1500, after)]))
    assert found is not None
    assert abs(found.index - 2000) <= 150
    assert found.accuracy_before == pytest.approx(before, abs=0.03)
    assert found.accuracy_after == pytest.approx(after, abs=0.04)


def test_a_step_up_is_not_a_change():
    rng = np.random.default_rng(2)
    assert find_change(stream(rng, [(2000, 0.7), (2000, 0.9)])) is None


def test_too_short_streams_are_not_scanned():
    assert find_change(np.ones(90), min_segment=50) is None


def test_fast_lane_fires_within_a_few_hundred_rows_of_a_collapse():
    rng = np.random.default_rng(3)
    change = find_change(stream(rng, [(2000, 0.9), (250, 0.55)]))
    found = fast_breach(change, 0.9, 0.03, min_rows=200)
    assert found is not None and found.drop > 0.3 and found.bound < 0.87
    assert "since the change" in found.describe()


@pytest.mark.parametrize("rows_after", [300, 1000, 3000])
def test_fast_lane_never_fires_on_a_drop_smaller_than_the_threshold(rows_after):
    """1.5 points down is a real change, but not one the 3-point rule acts on, however many rows."""
    rng = np.random.default_rng(4)
    fired = 0
    for _ in range(30):
        change = find_change(stream(rng, [(3000, 0.9), (rows_after, 0.885)]))
        fired += fast_breach(change, 0.9, 0.03) is not None
    assert fired == 0


def test_fast_lane_needs_its_minimum_rows_and_a_baseline():
    rng = np.random.default_rng(5)
    change = find_change(stream(rng, [(2000, 0.9), (120, 0.3)]))
    assert change is not None
    assert fast_breach(change, 0.9, 0.03, min_rows=200) is None
    assert fast_breach(change, 0.9, 0.03, min_rows=100) is not None
    assert fast_breach(change, None, 0.03, min_rows=100) is None
    assert fast_breach(None, 0.9, 0.03) is None


def test_relative_mode_scales_the_threshold():
    rng = np.random.default_rng(6)
    change = find_change(stream(rng, [(2000, 0.6), (1000, 0.45)]))
    assert fast_breach(change, 0.6, 0.10, mode="relative") is not None   # 0.06 absolute: cleared
    assert fast_breach(change, 0.6, 0.40, mode="relative") is None       # 0.24 absolute: not


# ---- regression: the same scan on the absolute errors ------------------------------------------
from monitor.drift.changepoint import find_loss_change  # noqa: E402
from monitor.tasks import REGRESSION  # noqa: E402


def abs_errors(rng, parts: list[tuple[int, float]]) -> np.ndarray:
    """|y - prediction| of a regressor whose errors are N(0, sd) per part (sd = the noise)."""
    y = rng.normal(10.0, 3.0, size=sum(n for n, _ in parts))
    pred = y + np.concatenate([rng.normal(0.0, sd, size=n) for n, sd in parts])
    return REGRESSION.per_row_loss(y, pred)


def test_regression_stationary_errors_show_no_change():
    rng = np.random.default_rng(7)
    found = [find_loss_change("regression", abs_errors(rng, [(n, 1.0)])) for n in (300, 1000, 3000) for _ in range(40)]
    assert sum(f is not None for f in found) <= 1


def test_regression_heavy_tailed_errors_show_no_change():
    """A few huge errors are not a step (the scan clips the stream at its 99th percentile)."""
    rng = np.random.default_rng(8)
    found = [find_loss_change("regression", np.abs(rng.standard_t(2, size=2000))) for _ in range(40)]
    assert sum(f is not None for f in found) <= 1


def test_regression_step_up_in_error_is_found_where_it_happened():
    rng = np.random.default_rng(9)
    change = find_loss_change("regression", abs_errors(rng, [(2000, 1.0), (800, 2.0)]))
    assert change is not None and change.metric == "mae" and change.accuracy_after is None
    assert abs(change.index - 2000) <= 60
    assert change.mae_before == pytest.approx(0.80, abs=0.05)   # E|N(0, 1)| = 0.798
    assert change.mae_after == pytest.approx(1.60, abs=0.12)
    assert change.worsening == pytest.approx(1.0, abs=0.2)
    assert find_loss_change("regression", abs_errors(rng, [(2000, 2.0), (800, 1.0)])) is None  # better is no change


def test_classifier_loss_stream_is_the_accuracy_scan():
    rng = np.random.default_rng(10)
    correct = stream(rng, [(2000, 0.9), (500, 0.6)])
    by_loss = find_loss_change("multiclass", 1.0 - correct)
    assert by_loss is not None and by_loss == find_change(correct) and by_loss.metric == "accuracy"


def test_regression_fast_lane_needs_the_mae_rise_proven():
    rng = np.random.default_rng(11)
    collapse = find_loss_change("regression", abs_errors(rng, [(2000, 1.0), (300, 3.0)]))
    found = fast_breach(collapse, 0.798, 0.10, min_rows=200)
    assert found is not None and found.metric == "mae" and found.drop > 1.0 and found.bound >= 0.798 * 1.1
    assert "mae" in found.describe() and "rise" in found.describe()
    assert fast_breach(collapse, 0.798, 0.10, min_rows=400) is None   # too few rows after it
    # a real but small rise (5 %) never proves a 10 % rule, however many rows
    fired = 0
    for _ in range(20):
        small = find_loss_change("regression", abs_errors(rng, [(2000, 1.0), (3000, 1.05)]))
        fired += fast_breach(small, 0.798, 0.10) is not None
    assert fired == 0


def test_a_step_inside_a_batch_stamped_once_moves_to_the_nearer_batch_edge():
    """Clients that stamp a whole batch with one ts: a step located 5 rows before the end of the
    pre-change batch starts at the next batch, not at the old concept's batch (delayed_labels)."""
    from monitor.drift.changepoint import batch_boundary
    ts = np.repeat(np.arange(10, dtype="int64") * 1_000_000_000, 500).astype("datetime64[ns]")
    assert batch_boundary(ts, 1995) == 2000 and batch_boundary(ts, 1751) == 2000
    assert batch_boundary(ts, 1749) == 1500 and batch_boundary(ts, 2000) == 2000
    assert batch_boundary(ts, 4990) == 4500        # no batch after the last: its own start
    unique = np.arange(100).astype("datetime64[s]")
    assert [batch_boundary(unique, i) for i in (0, 37, 99)] == [0, 37, 99]

    # On a real stream: the loss steps up at row 2000 of 500-row batches; the scan's own index may
    # land a few rows early, the time it dates the change to is batch 4's.
    from monitor.drift.changepoint import find_loss_change
    rng = np.random.default_rng(7)
    loss = np.concatenate([rng.random(2000) < 0.1, rng.random(1500) < 0.45]).astype(float)
    change = find_loss_change("binary", loss)
    assert change is not None and abs(change.index - 2000) < 100
    assert ts[batch_boundary(ts[: len(loss)], change.index)] == ts[2000]
