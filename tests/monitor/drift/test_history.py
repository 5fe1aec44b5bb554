"""Which checks' history goes (monitor/drift/history.py): by age with an injected clock, by size,
the deprecated count, and never a cited check."""
from __future__ import annotations

import math

import pytest

from monitor.drift.history import DAY, CheckHistory, Cited, HistoryPolicy, to_delete

T0 = 1_764_460_800.0


def checks(n: int, *, every: float = DAY, nbytes: int = 100) -> list[CheckHistory]:
    return [CheckHistory(f"c{i}", T0 + every * i, nbytes) for i in range(n)]


def ids(gone: list[CheckHistory]) -> list[str]:
    return [c.check_id for c in gone]


def test_age_deletes_what_is_older_than_the_days_by_the_clock_given():
    history = checks(10)
    assert ids(to_delete(history, HistoryPolicy(days=5), T0 + 9 * DAY)) == ["c0", "c1", "c2", "c3"]
    assert ids(to_delete(history, HistoryPolicy(days=5), T0 + 30 * DAY)) == ids(history)  # weeks later: all old
    assert to_delete(history, HistoryPolicy(days=None), T0 + 1000 * DAY) == []


def test_size_cap_deletes_the_oldest_until_the_total_fits():
    gone = to_delete(checks(10, every=60), HistoryPolicy(days=None, max_bytes=450), T0 + 600)
    assert ids(gone) == ["c0", "c1", "c2", "c3", "c4", "c5"]  # 4 x 100 bytes left


def test_cited_checks_are_never_deleted_and_count_towards_the_cap():
    cited = Cited(frozenset({"c1"}), ((T0 + 3 * DAY, T0 + 4 * DAY),))  # a report named, an incident's span
    history = checks(10)
    assert ids(to_delete(history, HistoryPolicy(days=1), T0 + 30 * DAY, cited)) == [
        "c0", "c2", "c5", "c6", "c7", "c8", "c9"]
    # c1, c3 and c4 (300 bytes) are kept even when they alone are over the cap.
    assert ids(to_delete(history, HistoryPolicy(days=None, max_bytes=200), T0 + 10 * DAY, cited)) == [
        "c0", "c2", "c5", "c6", "c7", "c8", "c9"]
    assert ids(to_delete(history, HistoryPolicy(days=None, max_bytes=500), T0 + 10 * DAY, cited)) == [
        "c0", "c2", "c5", "c6", "c7"]


def test_an_open_span_covers_every_later_check():
    cited = Cited(spans=((T0 + 5 * DAY, math.inf),))
    assert ids(to_delete(checks(10), HistoryPolicy(days=1), T0 + 100 * DAY, cited)) == ["c0", "c1", "c2", "c3", "c4"]


def test_the_deprecated_count_limits_uncited_checks_only():
    cited = Cited(frozenset({"c0"}))
    assert ids(to_delete(checks(6, every=60), HistoryPolicy(days=None, keep=2), T0 + 600, cited)) == [
        "c1", "c2", "c3"]


@pytest.mark.parametrize("given, kept", [(7, 7), (0, None)])
def test_reports_keep_still_works_with_a_warning(given, kept):
    from monitor.config import load_config
    with pytest.warns(FutureWarning, match="drift.reports_keep is deprecated"):
        cfg = load_config(path=None, environ={}, overrides={"drift": {"reports_keep": given}})
    policy = HistoryPolicy.from_config(cfg.drift)
    assert policy == HistoryPolicy(days=90.0, max_bytes=10 * 1024 ** 3, keep=kept)


def test_the_defaults_keep_ninety_days_under_ten_gib():
    from monitor.config import load_config
    assert HistoryPolicy.from_config(load_config(path=None, environ={}).drift) == HistoryPolicy(
        days=90.0, max_bytes=10 * 1024 ** 3, keep=None)
