"""The ingestion API per task over a real socket: multiclass and regression predictions and labels
in JSON and NDJSON into a real store, every bad input a 422 that names the record and the field
(and stores nothing), and ``GET /v1/schema`` / the OpenAPI document describing the records."""
from __future__ import annotations

from typing import Iterator

import httpx
import orjson
import pytest

from monitor.ingest import create_app
from monitor.store import PredictionStore
from monitor.tasks import internal_proba_column
from tests.monitor.ingest.conftest import TOKEN, make_config, serve

CLASSES = ["bird", "cat", "dog"]
NDJSON = {"Content-Type": "application/x-ndjson"}
FEATURES = {"x0": 0.5, "x1": -1.0, "region": "eu"}


@pytest.fixture(params=["multiclass", "regression"])
def task(request) -> str:
    return request.param


def _api(tmp_path, model: dict) -> Iterator[tuple[httpx.Client, PredictionStore]]:
    cfg = make_config(tmp_path / "home", model={"name": "t", **model})
    store = PredictionStore.from_config(cfg)
    try:
        with serve(create_app(cfg, store)) as url, \
                httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as client:
            yield client, store
    finally:
        store.close()


@pytest.fixture
def multiclass(tmp_path) -> Iterator[tuple[httpx.Client, PredictionStore]]:
    yield from _api(tmp_path, {"task": "multiclass", "classes": CLASSES, "target": "species"})


@pytest.fixture
def regression(tmp_path) -> Iterator[tuple[httpx.Client, PredictionStore]]:
    yield from _api(tmp_path, {"task": "regression", "target": "price"})


def _ndjson(records: list[dict]) -> bytes:
    return b"\n".join(orjson.dumps(r) for r in records) + b"\n"


def test_multiclass_json_and_ndjson_into_the_store(multiclass):
    api, store = multiclass
    as_mapping = {"id": "a", "features": FEATURES, "probabilities": {"bird": 0.1, "cat": 0.2, "dog": 0.7}}
    as_list = {"id": "b", "features": FEATURES, "probabilities": [0.6, 0.3, 0.1], "prediction": "cat"}
    assert api.post("/v1/predictions", json=[as_mapping]).json() == {"stored": 1, "duplicates": 0}
    r = api.post("/v1/predictions", content=_ndjson([as_list, as_mapping]), headers=NDJSON)
    assert r.json() == {"stored": 1, "duplicates": 1}
    r = api.post("/v1/labels", content=_ndjson([{"id": "a", "species": "dog"}, {"id": "b", "label": "bird"}]),
                 headers=NDJSON)
    assert r.json() == {"stored": 2, "duplicates": 0}
    window = store.window()
    assert window["id"].tolist() == ["a", "b"]
    assert window["prediction"].tolist() == [2, 1]       # indices into classes: the most probable, the served
    assert window["species"].tolist() == [2, 0]
    assert window[internal_proba_column(0)].tolist() == [0.1, 0.6]
    assert window["score"].tolist() == [0.7, 0.3]        # the probability of the served class


def test_regression_json_and_ndjson_into_the_store(regression):
    api, store = regression
    assert api.post("/v1/predictions", json=[{"id": "a", "features": FEATURES, "prediction": 103.5}]).status_code == 200
    r = api.post("/v1/predictions", content=_ndjson([{"id": "b", "features": FEATURES, "prediction": 7}]),
                 headers=NDJSON)
    assert r.json() == {"stored": 1, "duplicates": 0}
    assert api.post("/v1/labels", json=[{"id": "a", "price": 100.25}, {"id": "b", "label": 9}]).json()["stored"] == 2
    window = store.window()
    assert window["prediction"].tolist() == [103.5, 7.0] and window["score"].tolist() == [103.5, 7.0]
    assert window["price"].tolist() == [100.25, 9.0]


MULTICLASS_BAD = [
    ({"probabilities": {"bird": 0.1, "cat": 0.2, "eel": 0.7}}, "probabilities", "unknown class(es) 'eel'"),
    ({"probabilities": {"bird": 0.1, "cat": 0.2, "dog": 0.5}}, "probabilities", "sum to 0.8000"),
    ({"probabilities": [0.2, 0.2, 0.2]}, "probabilities", "sum to 0.6000"),
    ({"probabilities": {"bird": 0.3, "dog": 0.7}}, "probabilities", "missing class(es) 'cat'"),
    ({"probabilities": [0.3, 0.7]}, "probabilities", "expected 3 probabilities"),
    ({"probabilities": [0.1, 0.2, 0.7], "prediction": "eel"}, "prediction", "unknown class 'eel'"),
    ({"probabilities": "dog"}, "probabilities", "expected an object class -> probability or a list"),
    ({"score": 0.7}, "probabilities", "required field is missing"),
]


@pytest.mark.parametrize("bad, field, words", MULTICLASS_BAD)
@pytest.mark.parametrize("ndjson", [False, True])
def test_bad_multiclass_predictions_are_422_naming_record_and_field(multiclass, bad, field, words, ndjson):
    api, store = multiclass
    good = {"id": "ok", "features": FEATURES, "probabilities": [0.1, 0.2, 0.7]}
    batch = [good, good | {"id": "ok2"}, {"id": "bad", "features": FEATURES, **bad}]
    r = api.post("/v1/predictions", content=_ndjson(batch), headers=NDJSON) if ndjson else \
        api.post("/v1/predictions", json=batch)
    assert r.status_code == 422, r.text
    errors = r.json()["errors"]
    assert any(e["index"] == 2 and e["field"] == field and words in e["message"] for e in errors), errors
    assert store.row_counts()["predictions"] == 0


@pytest.mark.parametrize("record, field, words", [
    ({"id": "b", "species": "eel"}, "species", "unknown class 'eel'"),
    ({"id": "b", "species": 1.5}, "species", "unknown class 1.5"),
    ({"id": "b", "species": None}, "species", "expected a class name, got null"),
])
def test_bad_multiclass_labels_are_422_naming_record_and_field(multiclass, record, field, words):
    api, store = multiclass
    r = api.post("/v1/labels", json=[{"id": "a", "species": "cat"}, record])
    assert r.status_code == 422, r.text
    error = r.json()["errors"][0]
    assert (error["index"], error["field"]) == (1, field) and words in error["message"], error
    assert store.row_counts()["labels"] == 0


@pytest.mark.parametrize("kind, record, field, words", [
    ("predictions", {"id": "b", "features": FEATURES, "prediction": "high"}, "prediction",
     "expected a finite number, got 'high'"),
    ("predictions", {"id": "b", "features": FEATURES, "prediction": "103.5"}, "prediction", "expected a finite number"),
    ("predictions", {"id": "b", "features": FEATURES, "prediction": True}, "prediction", "expected a finite number"),
    ("predictions", {"id": "b", "features": FEATURES, "score": 0.5}, "score", "unknown field"),
    ("predictions", {"id": "b", "features": FEATURES}, "prediction", "required field is missing"),
    ("labels", {"id": "b", "price": "cheap"}, "price", "expected a finite number, got 'cheap'"),
    ("labels", {"id": "b", "label": None}, "price", "expected a finite number, got null"),
])
def test_bad_regression_records_are_422_naming_record_and_field(regression, kind, record, field, words):
    api, store = regression
    good = {"id": "a", "features": FEATURES, "prediction": 1.0} if kind == "predictions" else {"id": "a", "price": 2.0}
    r = api.post(f"/v1/{kind}", json=[good, record])
    assert r.status_code == 422, r.text
    errors = r.json()["errors"]
    assert any(e["index"] == 1 and e["field"] == field and words in e["message"] for e in errors), errors
    assert store.row_counts() == {"predictions": 0, "labels": 0}


def test_schema_and_openapi_describe_the_records_of_the_task(multiclass):
    api, _ = multiclass
    schema = api.get("/v1/schema").json()
    assert (schema["task"], schema["classes"], schema["target"]) == ("multiclass", CLASSES, "species")
    prediction = schema["records"]["prediction"]
    assert prediction["required"] == ["id", "features", "probabilities"]
    mapping, listed = prediction["properties"]["probabilities"]["anyOf"]
    assert mapping["required"] == CLASSES and (listed["minItems"], listed["maxItems"]) == (3, 3)
    assert prediction["properties"]["prediction"]["anyOf"][0]["enum"] == CLASSES
    assert schema["records"]["label"]["properties"]["species"]["enum"] == CLASSES

    spec = api.get("/openapi.json").json()
    body = spec["paths"]["/v1/predictions"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"]["oneOf"][0]["items"] == prediction   # the body is this model's record
    assert body["example"][0]["prediction"] == "bird"
    components = spec["components"]["schemas"]
    tasks = {name: s["x-task"] for name, s in components.items() if "x-task" in s}
    assert tasks == {"BinaryPrediction": "binary", "BinaryLabel": "binary", "MulticlassPrediction": "multiclass",
                     "MulticlassLabel": "multiclass", "RegressionPrediction": "regression",
                     "RegressionLabel": "regression"}
    assert components["RegressionPrediction"]["properties"]["prediction"]["type"] == "number"
    assert components["BinaryPrediction"]["required"] == ["id", "features", "score"]
    assert spec["paths"]["/v1/schema"]["get"]["responses"]["200"]["content"]["application/json"]["schema"][
        "properties"]["task"]["enum"] == ["binary", "multiclass", "regression"]


def test_every_example_of_the_document_is_accepted(tmp_path, task):
    """The OpenAPI examples of this task's records are records this server stores."""
    for client, store in _api(tmp_path, {"task": task, **({"classes": CLASSES} if task == "multiclass" else {})}):
        spec = client.get("/openapi.json").json()
        for path in ("/v1/predictions", "/v1/labels"):
            example = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["example"]
            r = client.post(path, json=example)
            assert r.status_code == 200, (path, r.text)
        assert len(store.window(labelled_only=True)) == 1
