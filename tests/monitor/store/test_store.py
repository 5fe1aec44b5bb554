"""PredictionStore against SQLite and PostgreSQL: round trips, idempotency, conflicts, the label join,
windows, retention and restarts."""
from __future__ import annotations

from datetime import datetime, timezone

import pandas as pd
import pytest
import sqlalchemy as sa

from monitor.errors import ConflictError, ValidationError
from tests.monitor.store.factories import T0, labels, prediction, predictions, small_model


def _utc(seconds: float) -> pd.Timestamp:
    return pd.Timestamp(seconds, unit="s", tz="UTC")


def test_round_trip_gives_the_contract_frame(store):
    result = store.add_predictions(predictions(5))
    assert (result.stored, result.duplicates) == (5, 0)
    frame = store.window()
    assert list(frame.columns) == ["id", "ts", "x0", "x1", "region", "score", "prediction", "label", "label_ts",
                                   "model_version", "input_uri"]
    dtypes = {c: str(t) for c, t in frame.dtypes.items()}
    assert dtypes == {"id": "object", "ts": "datetime64[ns, UTC]", "x0": "float64", "x1": "float64",
                      "region": "object", "score": "float64", "prediction": "Int64", "label": "Int64",
                      "label_ts": "datetime64[ns, UTC]", "model_version": "object", "input_uri": "object"}
    assert frame["model_version"].isna().all()  # not said: read as unknown
    assert frame["id"].tolist() == [f"r{i}" for i in range(5)]
    assert frame["ts"].tolist() == [_utc(T0 + i) for i in range(5)]
    assert frame["x0"].tolist() == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert frame["region"].tolist() == ["eu", "us", "eu", "us", "eu"]
    assert frame["score"].tolist() == [0.0, 0.1, 0.2, 0.3, 0.4]
    assert frame["prediction"].tolist() == [0, 0, 0, 0, 0]  # derived: score > threshold 0.5
    assert frame["label"].isna().all() and frame["label_ts"].isna().all()


def test_prediction_derived_from_threshold_unless_given(store):
    store.add_predictions([prediction(0, score=0.9), prediction(1, score=0.9, prediction=0), prediction(2, score=0.5)])
    assert store.window()["prediction"].tolist() == [1, 0, 0]


def test_resending_is_idempotent(store):
    store.add_predictions(predictions(10))
    again = store.add_predictions(predictions(12))  # 10 old + 2 new
    assert (again.stored, again.duplicates) == (2, 10)
    assert store.row_counts()["predictions"] == 12


def test_resend_without_ts_is_a_duplicate_of_a_row_that_had_one(store):
    store.add_predictions([prediction(1)])
    result = store.add_predictions([prediction(1, ts=None)])
    assert (result.stored, result.duplicates) == (0, 1)


def test_conflicting_resend_rejects_the_whole_batch(store):
    store.add_predictions(predictions(3))
    changed = prediction(1, score=0.95)
    with pytest.raises(ConflictError) as info:
        store.add_predictions([prediction(7), changed, prediction(8)])
    assert info.value.errors == [{"index": 1, "id": "r1", "field": "score",
                                  "message": "id 'r1' is already stored with score = 0.1; this record has 0.95"}]
    assert "'r1'" in str(info.value)
    assert sorted(store.window()["id"]) == ["r0", "r1", "r2"]  # r7 and r8 were not applied


@pytest.mark.parametrize("change, field", [
    ({"ts": T0 + 99}, "ts"),
    ({"prediction": 1}, "prediction"),
    ({"features": {"x0": 0.5, "x1": -1.0, "region": "apac"}}, "features.region"),
])
def test_conflicts_name_the_field(store, change, field):
    store.add_predictions([prediction(1)])
    with pytest.raises(ConflictError) as info:
        store.add_predictions([prediction(1, **change)])
    assert info.value.errors[0]["field"] == field


def test_repeats_inside_a_batch(store):
    result = store.add_predictions([prediction(1), prediction(2), prediction(1)])
    assert (result.stored, result.duplicates) == (2, 1)
    with pytest.raises(ValidationError) as info:
        store.add_predictions([prediction(5), prediction(5, score=0.7)])
    assert info.value.errors[0]["index"] == 1 and "first at index 0" in info.value.errors[0]["message"]
    assert store.row_counts()["predictions"] == 2


def test_invalid_records_store_nothing(store):
    with pytest.raises(ValidationError) as info:
        store.add_predictions([prediction(0), prediction(1, score="high")])
    assert info.value.errors == [{"index": 1, "field": "score",
                                  "message": "expected a finite number in [0, 1], got 'high'"}]
    assert store.row_counts()["predictions"] == 0


def test_labels_before_and_after_predictions_are_joined(store):
    store.add_labels(labels(["r0", "r1"]))               # before their predictions
    store.add_predictions(predictions(4))
    store.add_labels(labels(["r2"], ts=T0 + 7200))       # after
    frame = store.window()
    assert frame["label"].tolist()[:3] == [0, 1, 0] and pd.isna(frame["label"].iloc[3])
    assert frame["label_ts"].iloc[2] == _utc(T0 + 7200)
    labelled = store.window(labelled_only=True)
    assert labelled["id"].tolist() == ["r0", "r1", "r2"]
    assert labelled["label"].dtype == "Int64"


def test_label_resend_and_conflict(store):
    assert store.add_labels(labels(["a", "b"])).stored == 2
    assert store.add_labels(labels(["a", "b"])).duplicates == 2
    with pytest.raises(ConflictError) as info:
        store.add_labels([{"id": "c", "label": 1}, {"id": "a", "label": 1}])
    assert info.value.errors[0]["index"] == 1 and info.value.errors[0]["field"] == "label"
    assert store.row_counts()["labels"] == 2


def test_window_last_n_and_time_range(store):
    store.add_predictions(predictions(10))
    assert store.window(last_n=3)["id"].tolist() == ["r7", "r8", "r9"]
    since, until = datetime.fromtimestamp(T0 + 2, timezone.utc), datetime.fromtimestamp(T0 + 5, timezone.utc)
    assert store.window(since=since, until=until)["id"].tolist() == ["r2", "r3", "r4"]
    assert store.window(since=T0 + 8)["id"].tolist() == ["r8", "r9"]  # epoch seconds work too
    naive = datetime.fromtimestamp(T0 + 8, timezone.utc).replace(tzinfo=None)  # read as UTC
    assert store.window(since=naive)["id"].tolist() == ["r8", "r9"]
    assert store.window(since=since, last_n=2)["id"].tolist() == ["r8", "r9"]
    store.add_labels(labels(["r1", "r3", "r8"]))
    assert store.window(last_n=2, labelled_only=True)["id"].tolist() == ["r3", "r8"]


def test_rows_with_equal_ts_keep_arrival_order(store, clock):
    store.add_predictions([prediction(i, ts=None) for i in (3, 1, 2)])  # server time: all equal
    frame = store.window()
    assert frame["id"].tolist() == ["r3", "r1", "r2"]
    assert (frame["ts"] == _utc(clock.t)).all()


def test_window_arguments_are_checked(store):
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="last_n"):
            store.window(last_n=bad)
    with pytest.raises(ValueError, match="since"):
        store.window(since="yesterday")


def test_empty_window_has_the_columns_and_types(store):
    frame = store.window(labelled_only=True)
    assert len(frame) == 0
    assert str(frame["ts"].dtype) == "datetime64[ns, UTC]" and str(frame["label"].dtype) == "Int64"
    assert str(frame["x0"].dtype) == "float64"


def test_dataframe_input(store):
    frame = pd.DataFrame({"id": [1, 2], "ts": pd.to_datetime([T0, T0 + 1], unit="s"),
                          "x0": [1.0, 2.0], "x1": [3, 4], "region": pd.Categorical(["eu", "us"]),
                          "score": [0.2, 0.8], "label": [1, 0]})
    assert store.add_predictions(frame).stored == 2
    assert store.add_labels(frame[["id", "label"]]).stored == 2
    out = store.window()
    assert out["id"].tolist() == ["1", "2"] and out["x1"].tolist() == [3.0, 4.0]
    assert out["prediction"].tolist() == [0, 1] and out["label"].tolist() == [1, 0]
    assert out["ts"].iloc[0] == _utc(T0)
    with pytest.raises(ValidationError, match="no feature column"):
        store.add_predictions(frame.drop(columns=["x1"]))


def test_data_survives_a_restart(open_store, store_url):
    first = open_store()
    first.add_predictions(predictions(6))
    first.add_labels(labels(["r1"]))
    before = first.window()
    first.close()
    again = open_store(url=store_url)
    pd.testing.assert_frame_equal(again.window(), before)
    assert again.add_predictions(predictions(6)).duplicates == 6


def test_last_label_time_is_when_the_latest_label_arrived_and_row_counts(store, clock):
    assert store.last_label_time() is None
    store.add_labels(labels(["a", "b"], ts=T0))
    assert store.last_label_time() == datetime.fromtimestamp(clock.t, timezone.utc)
    # Labels dated far ahead and far back arrive later: the time is their arrival, not their ts.
    clock.t += 60
    store.add_labels([{"id": "future", "label": 1, "ts": "2027-06-01T00:00:00+14:00"},
                      {"id": "past", "label": 0, "ts": "2001-01-01T00:00:00Z"}])
    assert store.last_label_time() == datetime.fromtimestamp(clock.t, timezone.utc)
    clock.t += 60
    store.add_labels([{"id": "backfill", "label": 0, "ts": T0 - 86_400 * 365}])
    assert store.last_label_time() == datetime.fromtimestamp(clock.t, timezone.utc)
    store.add_predictions(predictions(3))
    assert store.row_counts() == {"predictions": 3, "labels": 5}


def test_retention_deletes_rows_received_long_ago_in_chunks(store, clock):
    clock.t = T0
    store.add_predictions(predictions(7, ts=T0))                     # received 40 days before retention runs
    store.add_labels(labels(["r0", "r1"], ts=T0))
    clock.t = T0 + 40 * 86400
    store.add_predictions(predictions(2, prefix="new", ts=clock.t - 3600))
    store.add_labels(labels(["new0"], ts=clock.t - 60))
    removed = store.apply_retention(30, chunk_rows=3)
    assert removed == 7 + 2
    assert store.window()["id"].tolist() == ["new0", "new1"]
    assert store.row_counts() == {"predictions": 2, "labels": 1}
    assert store.apply_retention(30) == 0
    with pytest.raises(ValueError):
        store.apply_retention(0)


def _received_days_ago(store, table, ids, days, clock):
    """Move rows' received_at into the past, as if they had been sent ``days`` ago."""
    q = store.engine.dialect.identifier_preparer.quote
    when = int((clock() - days * 86400) * 1_000_000)
    with store.write_transaction() as conn:
        for rid in ids:
            conn.execute(sa.text(f"UPDATE {q(table.name)} SET received_at = :t WHERE id = :id"), {"t": when, "id": rid})


def test_retention_keeps_a_backfill_of_old_predictions(store, clock):
    """Issue 23: historic predictions (ts two years old) loaded today are not retention's to delete;
    age counts from when driftloop received a row. Their labels stay joined."""
    two_years = clock() - 730 * 86400
    store.add_predictions(predictions(50, prefix="old", ts=two_years))
    store.add_labels(labels([f"old{i}" for i in range(50)], ts=two_years + 3600))
    assert store.apply_retention(30) == 0
    assert store.row_counts() == {"predictions": 50, "labels": 50}
    assert store.window(labelled_only=True)["label"].notna().sum() == 50

    # Received 31 days ago: gone, with its label. A label received long ago whose prediction is
    # still stored stays with it; one whose prediction is gone (or never came) goes.
    store.add_labels(labels(["orphan"], ts=two_years))
    _received_days_ago(store, store.tables.predictions, ["old0", "old1"], 31, clock)
    _received_days_ago(store, store.tables.labels, ["old0", "old2", "orphan"], 31, clock)
    assert store.apply_retention(30) == 2 + 2   # predictions old0, old1; labels old0 (no prediction), orphan
    assert store.row_counts() == {"predictions": 48, "labels": 49}
    frame = store.window(labelled_only=True)
    assert "old0" not in set(frame["id"]) and "old2" in set(frame["id"]) and len(frame) == 48


def test_generic_reader_matches_the_fast_one(open_sqlite_store):
    fast = open_sqlite_store(child_reader_min_rows=0, reader_processes=3)  # child processes read every window
    slow = open_sqlite_store(use_adbc=False)
    assert fast._adbc_path is not None and slow._adbc_path is None
    n = 25_000  # enough rows for the window to be split between children
    # runs of equal ts, out of order
    fast.add_predictions([prediction(i, ts=T0 - i + i // 7 * 7 * 2) for i in range(n)])
    fast.add_labels(labels([f"r{i}" for i in range(0, n, 3)]))
    for kwargs in ({}, {"last_n": 7}, {"last_n": 12_345}, {"labelled_only": True},
                   {"labelled_only": True, "last_n": 5_000}, {"since": T0 + 100, "until": T0 + 20_000},
                   {"since": T0 + 100, "last_n": 1_000}, {"since": T0 + 10**9}):
        expected = slow.window(**kwargs)
        pd.testing.assert_frame_equal(fast.window(**kwargs), expected)
        assert expected["ts"].is_monotonic_increasing, kwargs


def test_a_failing_fast_reader_falls_back(open_sqlite_store, monkeypatch, caplog):
    from monitor.store import sqlite_reader
    store = open_sqlite_store(child_reader_min_rows=0)
    store.add_predictions(predictions(3))
    monkeypatch.setattr(sqlite_reader, "CHILD", sqlite_reader.CHILD.with_name("missing_reader.py"))
    assert store.window()["id"].tolist() == ["r0", "r1", "r2"]
    assert "fast SQLite window reader failed" in caplog.text


def test_numbers_are_stored_exactly(store):
    values = [0.1, 1e-300, 123456789.123456789, -0.0, 2**53]
    store.add_predictions([prediction(i, features={"x0": v, "x1": 0, "region": "é ☃"}) for i, v in enumerate(values)])
    frame = store.window()
    assert frame["x0"].tolist() == [float(v) for v in values]
    assert frame["region"].tolist() == ["é ☃"] * len(values)


def test_another_model_has_its_own_tables(open_store):
    a = open_store(small_model("alpha"))
    b = open_store(small_model("beta"))
    a.add_predictions(predictions(2))
    assert len(b.window()) == 0 and b.add_predictions(predictions(2)).stored == 2


def test_fast_reader_and_writes_interleaved_keep_the_file_intact(open_sqlite_store):
    """Regression: the ADBC driver's own SQLite copy, loaded in-process, corrupted the file
    ("database disk image is malformed"). It runs in a child process now."""
    store = open_sqlite_store(child_reader_min_rows=0)
    for k in range(5):
        store.add_predictions(predictions(5, prefix=f"b{k}-"))
        store.add_labels(labels([f"b{k}-1"]))
        assert len(store.window()) == 5 * (k + 1)
        assert len(store.window(last_n=3, labelled_only=True)) == min(3, k + 1)
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"


def test_model_version_is_stored_per_row(store):
    store.add_predictions([prediction(0, model_version="3"), prediction(1, model_version=4), prediction(2)])
    store.add_predictions(predictions(2, start=3), model_version="5")  # the keyword fills rows that do not say
    assert store.window()["model_version"].tolist() == ["3", "4", None, "5", "5"]


def test_model_version_resend_without_it_is_a_duplicate_but_a_different_one_conflicts(store):
    store.add_predictions([prediction(0, model_version="3")])
    assert store.add_predictions([prediction(0)]).duplicates == 1
    with pytest.raises(ConflictError) as info:
        store.add_predictions([prediction(0, model_version="4")])
    assert info.value.errors[0]["field"] == "model_version"


@pytest.mark.parametrize("bad", [-1, "", "x" * 65, 1.5, True, ["3"]])
def test_bad_model_version_names_the_field(store, bad):
    with pytest.raises(ValidationError) as info:
        store.add_predictions([prediction(0), prediction(1, model_version=bad)])
    assert [(e["index"], e["field"]) for e in info.value.errors] == [(1, "model_version")]
    assert "model version" in info.value.errors[0]["message"]
    assert store.row_counts()["predictions"] == 0


def test_dataframe_model_version_column(store):
    frame = pd.DataFrame({"id": ["a", "b"], "x0": [1.0, 2.0], "x1": [0.0, 0.0], "region": ["eu", "us"],
                          "score": [0.2, 0.9], "model_version": ["7", None]})
    store.add_predictions(frame)
    assert store.window()["model_version"].tolist() == ["7", None]
