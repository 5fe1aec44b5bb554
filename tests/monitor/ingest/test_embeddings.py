"""Embedding features and input_uri through the HTTP API and the client, against a real uvicorn
server and a real SQLite store: stored and read back bit-exact as float32, bad vectors refused
with the record and field named and nothing stored, for every task and for JSON and NDJSON."""
from __future__ import annotations

from typing import Iterator

import httpx
import numpy as np
import orjson
import pandas as pd
import pytest

from monitor.client import DriftloopClient, InvalidRecords, RequestRejected
from monitor.embeddings import MAX_INPUT_URI_CHARS, column
from monitor.ingest import create_app
from monitor.store import PredictionStore
from tests.monitor.ingest.conftest import TOKEN, make_config, serve
from tests.monitor.store.factories import T0

DIM = 8
FEATURES = [{"name": "x0"}, {"name": "emb", "type": "embedding", "dim": DIM}]
# Where input_uri may point: s3 keys as they are, paths inside /data (relative ones from it).
INPUTS = {"input_roots": ["/data"], "input_schemes": ["s3"]}
OUTPUTS: dict[str, dict] = {"binary": {"score": 0.7}, "multiclass": {"probabilities": {"a": 0.25, "b": 0.75}},
           "regression": {"prediction": 12.5}}


@pytest.fixture(params=["binary", "multiclass", "regression"])
def task(request) -> str:
    return request.param


@pytest.fixture
def served(tmp_path, task) -> Iterator[tuple[httpx.Client, PredictionStore, str]]:
    model = {"features": FEATURES, "task": task, **INPUTS, **({"classes": ["a", "b"]} if task == "multiclass" else {})}
    cfg = make_config(tmp_path / "home", model)
    store = PredictionStore.from_config(cfg)
    with serve(create_app(cfg, store)) as url, \
            httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as api:
        yield api, store, url
    store.close()


def vectors(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)


def record(i: int, task: str, vector, **extra) -> dict:
    emb = vector.tolist() if isinstance(vector, np.ndarray) else vector
    return {"id": f"r{i}", "ts": T0 + i, "features": {"x0": float(i), "emb": emb}, **OUTPUTS[task], **extra}


def test_vectors_and_uris_round_trip_bit_exact(served, task):
    api, store, _ = served
    block = vectors(6)
    records = [record(i, task, block[i], **({"input_uri": f"s3://bucket/img/{i}.png"} if i % 2 else {}))
               for i in range(6)]
    records[2]["features"]["emb"] = None  # a missing vector
    response = api.post("/v1/predictions", json=records)
    assert response.status_code == 200, response.text
    window = store.window()
    assert window["emb"].dtype == object
    for i, vec in enumerate(window["emb"]):
        if i == 2:
            assert vec is None
        else:
            assert vec.dtype == np.float32 and vec.view(np.uint32).tolist() == block[i].view(np.uint32).tolist()
    assert window["input_uri"].tolist() == [None, "s3://bucket/img/1.png", None, "s3://bucket/img/3.png", None,
                                            "s3://bucket/img/5.png"]
    # The same batch again is a duplicate, not a conflict: the stored bytes equal the sent ones.
    assert api.post("/v1/predictions", json=records).json() == {"stored": 0, "duplicates": 6}


def test_ndjson_body(served, task):
    api, store, _ = served
    block = vectors(3, seed=1)
    body = b"\n".join(orjson.dumps(record(i, task, block[i], input_uri=f"/data/{i}.txt")) for i in range(3))
    response = api.post("/v1/predictions", content=body, headers={"Content-Type": "application/x-ndjson"})
    assert response.status_code == 200, response.text
    window = store.window()
    assert np.array_equal(np.stack(window["emb"].to_list()), block)
    assert window["input_uri"].tolist() == ["/data/0.txt", "/data/1.txt", "/data/2.txt"]


BAD_VECTORS = [
    (list(range(DIM - 1)), f"expected a list of {DIM} numbers, got {DIM - 1}"),
    ([0.5] * (DIM - 1) + ["0.5"], f"expected a list of {DIM} numbers, got '0.5' at position {DIM - 1}"),
    ([0.5] * (DIM - 1) + [True], f"expected a list of {DIM} numbers, got true at position {DIM - 1}"),
    ([0.5] * (DIM - 1) + [None], f"expected a list of {DIM} numbers, got null at position {DIM - 1}"),
    ([0.5] * (DIM - 1) + [[1.0]], f"expected a list of {DIM} numbers, got a list at position {DIM - 1}"),
    ([1e39] + [0.5] * (DIM - 1), "within float32's range"),
    ({"a": 1}, f"expected a list of {DIM} numbers, got an object"),
    (0.5, f"expected a list of {DIM} numbers, got 0.5"),
]


@pytest.mark.parametrize("vector, message", BAD_VECTORS)
def test_a_bad_vector_is_refused_naming_record_and_field(served, task, vector, message):
    api, store, _ = served
    good = vectors(3)
    records = [record(0, task, good[0]), record(1, task, vector), record(2, task, good[2])]
    response = api.post("/v1/predictions", json=records)
    assert response.status_code == 422, response.text
    errors = response.json()["errors"]
    assert [(e["index"], e["field"]) for e in errors] == [(1, "features.emb")]
    assert message in errors[0]["message"]
    assert store.row_counts()["predictions"] == 0  # the whole batch refused


def test_nan_and_infinity_are_refused(tmp_path):
    """JSON has neither; a Python caller of the store might send them."""
    cfg = make_config(tmp_path / "home", {"features": FEATURES})
    with PredictionStore.from_config(cfg) as store:
        for bad in (float("nan"), float("inf")):
            vec = [0.5] * DIM
            vec[4] = bad
            with pytest.raises(Exception) as info:
                store.add_predictions([record(0, "binary", vec)])
            assert info.value.errors[0]["field"] == "features.emb"
            assert "position 4" in info.value.errors[0]["message"]
        assert store.row_counts()["predictions"] == 0


@pytest.mark.parametrize("uri, message", [
    ("", "got a string of 0 characters"),
    ("x" * (MAX_INPUT_URI_CHARS + 1), f"got a string of {MAX_INPUT_URI_CHARS + 1} characters"),
    ("a\x00b", "without NUL characters"),
    (17, "got 17"),
])
def test_a_bad_input_uri_is_refused(served, task, uri, message):
    api, store, _ = served
    records = [record(0, task, vectors(1)[0]), record(1, task, vectors(1)[0], input_uri=uri)]
    response = api.post("/v1/predictions", json=records)
    assert response.status_code == 422, response.text
    errors = response.json()["errors"]
    assert [(e["index"], e["field"]) for e in errors] == [(1, "input_uri")]
    assert message in errors[0]["message"]
    assert store.row_counts()["predictions"] == 0


def test_the_fast_path_takes_embedding_batches(tmp_path):
    cfg = make_config(tmp_path / "home", {"features": FEATURES, **INPUTS})
    with PredictionStore.from_config(cfg) as store:
        block = vectors(50)
        store.add_predictions([record(i, "binary", block[i], input_uri=f"u{i}") for i in range(50)])
        assert store.validator.paths == {("prediction", "fast"): 1}
        fast = store.window()
        # The precise path stores the same bytes (it takes a batch with an integer model_version).
        store.add_predictions([record(i + 100, "binary", block[i], model_version=7) for i in range(50)])
        assert store.validator.paths[("prediction", "slow")] == 1
        slow = store.window().iloc[50:]
        assert np.stack(slow["emb"].to_list()).tobytes() == np.stack(fast["emb"].to_list()).tobytes()


def test_schema_shows_embeddings_and_input_uri(served):
    api, _, _ = served
    schema = api.get("/v1/schema").json()
    assert schema["features"][1] == {"name": "emb", "type": "embedding", "dim": DIM}
    props = schema["records"]["prediction"]["properties"]
    assert (props["features"]["properties"]["emb"]["minItems"] == props["features"]["properties"]["emb"]["maxItems"]
            == DIM)
    assert props["input_uri"]["maxLength"] == MAX_INPUT_URI_CHARS


def test_client_sends_a_2d_array_or_a_column_of_vectors(served, task):
    _, store, url = served
    if task != "binary":
        pytest.skip("the client's embedding handling does not depend on the task")
    block = vectors(5, seed=3)
    frame = pd.DataFrame({"id": [f"c{i}" for i in range(5)], "ts": T0 + np.arange(5), "x0": np.arange(5.0),
                          "score": 0.5, "input_uri": [f"img/{i}.png" for i in range(4)] + [None]})
    with DriftloopClient(url, token=TOKEN) as dl:
        assert dl.log_predictions(frame, embeddings={"emb": block}).stored == 5
        as_column = frame.assign(id=[f"d{i}" for i in range(5)], emb=column(block[::-1].copy()))
        assert dl.log_predictions(as_column).stored == 5
        with pytest.raises(RequestRejected) as info:  # a wrong length is named by the server
            dl.log_predictions(frame.assign(id="e" + frame["id"]), embeddings={"emb": block[:, :-1]})
        assert info.value.errors[0]["field"] == "features.emb"
        holed = block.copy()
        holed[2, 5] = np.nan   # sent as null at that position: the server named a null nobody sent
        with pytest.raises(InvalidRecords) as bad:
            dl.log_predictions(frame.assign(id="f" + frame["id"]), embeddings={"emb": holed})
        assert [(e["index"], e["field"]) for e in bad.value.errors] == [(2, "features.emb")]
        assert "got NaN at position 5" in bad.value.errors[0]["message"]
        as_lists = frame.assign(id="g" + frame["id"], emb=[list(map(float, v)) for v in holed])
        with pytest.raises(InvalidRecords, match="NaN at position 5"):
            dl.log_predictions(as_lists)
    window = store.window()
    assert not window["id"].str.startswith(("f", "g")).any()
    stored = np.stack(window["emb"].to_list())
    assert np.array_equal(stored[window["id"].str.startswith("c").to_numpy()], block)
    assert np.array_equal(stored[window["id"].str.startswith("d").to_numpy()], block[::-1])
    assert window.loc[window["id"] == "c1", "input_uri"].item() == "img/1.png"
    assert window.loc[window["id"] == "c4", "input_uri"].item() is None
