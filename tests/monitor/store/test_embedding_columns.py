"""Embedding features in the store (SQLite and PostgreSQL): one float32 BLOB/BYTEA column per
feature, read back bit-exact by both window readers; new ones added at sync; type or dim changes
refused naming the feature; input_uri stored as text."""
from __future__ import annotations

import numpy as np
import pytest
import sqlalchemy as sa

from monitor.config import ModelConfig
from monitor.errors import StoreError
from monitor.store import PredictionStore
from tests.monitor.store.factories import T0, prediction, small_model

DIM = 6


def embedded_model(dim: int = DIM, name: str = "emb") -> ModelConfig:
    model = small_model(extra=[{"name": name, "type": "embedding", "dim": dim}])
    # input_uri: s3 keys as they are, relative paths inside the (lexical) root /inputs.
    return model.model_copy(update={"input_roots": ["/inputs"], "input_schemes": ["s3"]})


def rows(n: int, start: int = 0, seed: int = 0, dim: int = DIM) -> tuple[list[dict], np.ndarray]:
    block = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    records = []
    for k in range(n):
        rec = prediction(start + k)
        rec["features"]["emb"] = None if k % 5 == 4 else block[k].tolist()
        if k % 3 == 0:
            rec["input_uri"] = f"s3://b/{start + k}.png"
        records.append(rec)
    return records, block


def assert_vectors(window, records, block) -> None:
    by_id = dict(zip(window["id"], window["emb"]))
    for k, rec in enumerate(records):
        got = by_id[rec["id"]]
        if rec["features"]["emb"] is None:
            assert got is None
        else:
            assert got.dtype == np.float32 and got.tobytes() == block[k].tobytes()


def test_vectors_and_uris_round_trip(open_store):
    store = open_store(embedded_model())
    records, block = rows(20)
    assert store.add_predictions(records).stored == 20
    window = store.window()
    assert list(window.columns)[:6] == ["id", "ts", "x0", "x1", "region", "emb"]
    assert_vectors(window, records, block)
    assert window["input_uri"].tolist() == [r.get("input_uri") for r in records]
    assert_vectors(store.window(last_n=7), records[-7:], block[-7:])
    columns = {c["name"]: c["type"] for c in sa.inspect(store.engine).get_columns(store.tables.predictions.name)}
    assert isinstance(columns["e_emb"], sa.LargeBinary) and isinstance(columns["input_uri"], sa.String)


def test_the_child_reader_decodes_the_same_vectors(tmp_path, clock):
    """Large SQLite windows come through ADBC child processes (window.py); forced here at 2 rows."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with PredictionStore(url, embedded_model(), clock=clock, child_reader_min_rows=2) as store:
        if store._adbc_path is None:
            pytest.skip("no ADBC SQLite driver installed")
        records, block = rows(30)
        store.add_predictions(records)
        with PredictionStore(url, embedded_model(), clock=clock, use_adbc=False) as generic:
            expected = generic.window()
        for window in (store.window(), store.window(last_n=11)):
            assert_vectors(window, records[-len(window):], block[-len(window):])
            assert window["input_uri"].tolist() == expected["input_uri"].tolist()[-len(window):]


def test_a_new_embedding_feature_is_added_to_an_existing_table(open_store, store_url):
    old = open_store(small_model())
    old.add_predictions([prediction(i) for i in range(3)])
    old.close()
    store = open_store(embedded_model(), url=store_url)
    records, block = rows(4, start=10)
    store.add_predictions(records)
    window = store.window()
    assert window["emb"].iloc[:3].tolist() == [None, None, None]  # stored before the feature existed
    assert_vectors(window.iloc[3:], records, block)


@pytest.mark.parametrize("changed, message", [
    (embedded_model(dim=DIM + 1), f"'emb' is stored with dim {DIM} but configured with dim {DIM + 1}"),
    (ModelConfig.model_validate({"name": "m", "features": [{"name": "x0"}, {"name": "x1"},
                                                             {"name": "region", "type": "categorical"},
                                                             {"name": "emb"}]}),
     "'emb' is stored as embedding but configured as numeric"),
    (ModelConfig.model_validate({"name": "m", "features": [{"name": "x0", "type": "embedding", "dim": 3},
                                                             {"name": "x1"}, {"name": "region", "type": "categorical"},
                                                             {"name": "emb", "type": "embedding", "dim": DIM}]}),
     "'x0' is stored as numeric but configured as embedding"),
])
def test_type_or_dim_changes_are_refused(open_store, store_url, changed, message):
    store = open_store(embedded_model())
    store.add_predictions(rows(2)[0])
    store.close()
    with pytest.raises(StoreError, match="feature types changed") as info:
        open_store(changed, url=store_url)
    assert message in str(info.value)


def test_a_changed_dim_before_any_vector_is_stored_is_fine(open_store, store_url):
    open_store(embedded_model()).close()
    store = open_store(embedded_model(dim=DIM + 2), url=store_url)
    records, block = rows(3, dim=DIM + 2)
    store.add_predictions(records)
    assert_vectors(store.window(), records, block)


def test_a_resent_row_with_another_vector_conflicts(open_store):
    store = open_store(embedded_model())
    records, _ = rows(2)
    store.add_predictions(records)
    changed = [dict(records[0], features={**records[0]["features"], "emb": [0.0] * DIM})]
    with pytest.raises(Exception) as info:
        store.add_predictions(changed)
    assert info.value.errors[0]["field"] == "features.emb"
    assert store.row_counts()["predictions"] == 2


def test_a_dataframe_of_vectors_is_stored(open_store):
    """The store's DataFrame path (frames.prediction_records): a column of float32 arrays."""
    import pandas as pd

    store = open_store(embedded_model())
    block = np.random.default_rng(5).normal(size=(4, DIM)).astype(np.float32)
    frame = pd.DataFrame({"id": [f"f{i}" for i in range(4)], "ts": T0 + np.arange(4), "x0": 1.0, "x1": 2.0,
                          "region": "eu", "score": 0.4, "emb": list(block),
                          "input_uri": ["a/1.png", None, "a/3.png", None]})
    assert store.add_predictions(frame).stored == 4
    window = store.window()
    assert np.stack(window["emb"].to_list()).tobytes() == block.tobytes()
    assert window["input_uri"].tolist() == ["a/1.png", None, "a/3.png", None]
