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
    assert found is not None and found.drop > 0.3 and found.upper_bound < 0.87
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
