"""Rows stored with a time pandas cannot hold (past 2262-04-11: accepted by older versions, which
took times up to 2286, or written around ingestion) are left out of windows with a warning that
counts them; before, every window read raised ArrowInvalid until retention deleted the row."""
from __future__ import annotations

import logging

import pytest
import sqlalchemy as sa

from tests.monitor.store.factories import T0, labels, predictions

LATE_US = 9_999_999_999 * 1_000_000  # 2286-11-20: what the old bound let in
PAST_PANDAS_US = 9_223_372_037 * 1_000_000  # a second past pd.Timestamp.max
EARLY_US = -9_300_000_000 * 1_000_000  # before pd.Timestamp.min (1677)


def _copy_row(store, source_id: str, new_id: str, ts_us: int) -> None:
    """A stored prediction copied under ``new_id`` with ``ts_us``, straight into the table
    (no validation): as an older driftloop, or a hand-made INSERT, would have left it."""
    table = store.tables.predictions
    with store.engine.begin() as conn:
        row = dict(conn.execute(sa.select(table).where(table.c.id == source_id)).mappings().one())
        row.pop("seq")
        conn.execute(table.insert(), {**row, "id": new_id, "ts": ts_us})


def _label(store, rid: str, ts_us: int) -> None:
    with store.engine.begin() as conn:
        conn.execute(store.tables.labels.insert(), {"id": rid, "label": 1, "ts": ts_us, "received_at": 1})


@pytest.fixture(params=["in-process", "child-reader"])
def sqlite_store(request, open_sqlite_store):
    if request.param == "in-process":
        return open_sqlite_store(use_adbc=False)
    store = open_sqlite_store(child_reader_min_rows=0, reader_processes=2)
    if store._adbc_path is None:
        pytest.skip("no ADBC SQLite driver installed")
    return store


def test_rows_past_pandas_range_are_left_out_of_windows_with_a_counted_warning(sqlite_store, caplog):
    store = sqlite_store
    store.add_predictions(predictions(5))
    store.add_labels(labels(["r0", "r1", "r2"]))
    _copy_row(store, "r0", "late-1", LATE_US)
    _copy_row(store, "r1", "late-2", PAST_PANDAS_US)
    _copy_row(store, "r2", "early", EARLY_US)
    _copy_row(store, "r3", "late-label", int((T0 + 3.5) * 1e6))
    _label(store, "late-label", LATE_US)  # a label stamped past the range on a good prediction
    _label(store, "late-1", int(T0 * 1e6))
    assert store.row_counts() == {"predictions": 9, "labels": 5}

    with caplog.at_level(logging.WARNING, logger="monitor.store.window"):
        frame = store.window()
    assert frame["id"].tolist() == ["r0", "r1", "r2", "r3", "r4"]
    assert frame["ts"].is_monotonic_increasing and str(frame["ts"].dtype) == "datetime64[ns, UTC]"
    assert "left out 4 stored row(s)" in caplog.text and "2262-04-11T00:00:00Z" in caplog.text

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="monitor.store.window"):
        assert store.window(labelled_only=True)["id"].tolist() == ["r0", "r1", "r2"]
        # The two late rows and the one with a late label take three of the five newest slots.
        assert store.window(last_n=5)["id"].tolist() == ["r3", "r4"]
        assert store.window(since=T0 + 2)["id"].tolist() == ["r2", "r3", "r4"]
    assert "left out" in caplog.text


def test_a_window_without_such_rows_warns_nothing(sqlite_store, caplog):
    store = sqlite_store
    store.add_predictions(predictions(3))
    store.add_labels(labels(["r0"]))
    with caplog.at_level(logging.WARNING, logger="monitor.store.window"):
        assert len(store.window()) == 3 and len(store.window(labelled_only=True)) == 1
        assert len(store.window(since=T0 + 10**6)) == 0
    assert "left out" not in caplog.text
