"""The model's tables follow the configured features across restarts."""
from __future__ import annotations

import logging

import pandas as pd
import pytest

from monitor.errors import StoreError
from tests.monitor.store.factories import T0, prediction, predictions, small_model


def test_new_feature_becomes_a_column_and_old_rows_read_as_missing(open_store, store_url):
    old = open_store()
    old.add_predictions(predictions(2))
    old.close()
    model = small_model(extra=[{"name": "age"}, {"name": "plan", "type": "categorical"}])
    new = open_store(model, url=store_url)
    rec = prediction(5)
    rec["features"].update(age=41, plan="pro")
    new.add_predictions([rec])
    frame = new.window()
    assert frame["age"].tolist()[:2] != frame["age"].tolist()[:2]  # NaN != NaN: missing for old rows
    assert frame["age"].iloc[2] == 41.0 and frame["plan"].tolist() == [None, None, "pro"]
    assert str(frame["age"].dtype) == "float64"
    # Re-sending an old record with the new feature is not a conflict: there was nothing to contradict.
    resend = prediction(0)
    resend["features"].update(age=3, plan="free")
    assert new.add_predictions([resend]).duplicates == 1


def test_removed_feature_is_ignored_and_kept(open_store, store_url, caplog):
    open_store().add_predictions(predictions(2))
    caplog.set_level(logging.INFO, logger="monitor.store.schema")
    narrow = open_store(small_model(drop=("x1",)), url=store_url)
    assert "no longer configured" in caplog.text and "x1" in caplog.text
    assert "x1" not in narrow.window().columns
    rec = prediction(9)
    del rec["features"]["x1"]
    assert narrow.add_predictions([rec]).stored == 1
    wide = open_store(url=store_url)  # the feature comes back with its data
    assert wide.window()["x1"].tolist()[:2] == [0.0, -1.0] and pd.isna(wide.window()["x1"].iloc[2])


def test_changed_feature_type_is_a_clear_error(open_store, store_url):
    open_store().add_predictions(predictions(1))
    model = small_model(drop=("x1",), extra=[{"name": "x1", "type": "categorical"}])
    with pytest.raises(StoreError, match="'x1' is stored as numeric but configured as categorical"):
        open_store(model, url=store_url)


def test_registry_records_models(open_store):
    store = open_store(small_model("alpha"))
    with store.engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT name, predictions_table, labels_table FROM driftloop_models").all()
    assert [tuple(r) for r in rows] == [("alpha", "predictions_alpha", "labels_alpha")]


def test_model_names_with_dots_and_dashes_get_safe_tables(open_store):
    store = open_store(small_model("Churn-v2.1"))
    assert store.tables.predictions.name == "predictions_churn_v2_1"
    assert store.add_predictions(predictions(1, ts=T0)).stored == 1


@pytest.mark.parametrize("model, message", [
    ({"name": "my model"}, "model name 'my model' must be 1-48 letters"),
    ({"name": "x" * 49}, "must be 1-48"),
    ({"features": [{"name": "Age"}, {"name": "age"}]}, "duplicate feature names (case-insensitive): Age, age"),
    ({"features": [{"name": "f" * 61}]}, "longer than 60 characters"),
    ({"features": [{"name": "label_ts"}]}, "clash with reserved columns: label_ts"),
    ({"score": "label"}, "score, prediction, target and id must be four different column names"),
])
def test_model_config_keeps_store_names_safe(model, message):
    from monitor.config import load_config
    from monitor.errors import ConfigError
    with pytest.raises(ConfigError) as info:
        load_config(environ={}, overrides={"model": model})
    assert message in str(info.value)


def test_tables_from_before_model_version_get_the_column(open_store, store_url):
    old = open_store()
    old.add_predictions(predictions(2))
    table = old.tables.predictions.name
    with old.write_transaction() as conn:  # a store made by a release without the column
        conn.exec_driver_sql(f'ALTER TABLE "{table}" DROP COLUMN model_version')
    old.close()
    new = open_store(url=store_url)
    new.add_predictions([prediction(7, model_version="2")])
    assert new.window()["model_version"].tolist() == [None, None, "2"]
