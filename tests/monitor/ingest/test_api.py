"""The ingestion API over a real socket: formats, status codes, error bodies, atomicity, idempotency."""
from __future__ import annotations

import gzip
import sqlite3
import threading

import httpx
import orjson
import pytest

from monitor.ingest import create_app
from monitor.store import PredictionStore
from tests.monitor.ingest.conftest import TOKEN, make_config, serve
from tests.monitor.store.factories import T0, labels, prediction, predictions

NDJSON = {"Content-Type": "application/x-ndjson"}


def _ndjson(records: list[dict]) -> bytes:
    return b"\n".join(orjson.dumps(r) for r in records) + b"\n"


def test_post_a_json_list(api, store):
    r = api.post("/v1/predictions", json=predictions(5))
    assert r.status_code == 200 and r.json() == {"stored": 5, "duplicates": 0}
    assert store.window()["id"].tolist() == [f"r{i}" for i in range(5)]


def test_records_wrapper_and_ndjson(api, store):
    assert api.post("/v1/predictions", json={"records": predictions(2)}).json()["stored"] == 2
    body = _ndjson(predictions(3, start=2)).replace(b"\n", b"\r\n\n", 1)  # blank lines and CRLF are fine
    r = api.post("/v1/predictions", content=body, headers=NDJSON)
    assert r.status_code == 200 and r.json() == {"stored": 3, "duplicates": 0}
    r = api.post("/v1/labels", content=_ndjson(labels(["r0", "r4"])), headers={"Content-Type": "application/jsonl"})
    assert r.json() == {"stored": 2, "duplicates": 0}
    assert store.window(labelled_only=True)["id"].tolist() == ["r0", "r4"]


def test_gzip_body(api, store):
    body = gzip.compress(orjson.dumps(predictions(4)))
    r = api.post("/v1/predictions", content=body,
                 headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert r.status_code == 200 and r.json()["stored"] == 4


def test_resend_is_idempotent_and_conflict_is_409(api, store):
    api.post("/v1/predictions", json=predictions(3))
    assert api.post("/v1/predictions", json=predictions(4)).json() == {"stored": 1, "duplicates": 3}
    r = api.post("/v1/predictions", json=[prediction(10), prediction(2, score=0.99)])
    assert r.status_code == 409
    body = r.json()
    assert "'r2'" in body["error"]
    assert body["errors"] == [{"index": 1, "id": "r2", "field": "score",
                               "message": "id 'r2' is already stored with score = 0.2; this record has 0.99"}]
    assert "r10" not in set(store.window()["id"])


def test_invalid_batch_is_422_naming_index_and_field_and_stores_nothing(api, store):
    bad = [prediction(0), prediction(1), prediction(2), prediction(3)]
    bad[3]["features"]["x1"] = "abc"
    bad[1]["surprise"] = True
    r = api.post("/v1/predictions", json=bad)
    assert r.status_code == 422
    body = r.json()
    assert body["errors"] == [
        {"index": 1, "field": "surprise", "message": "unknown field (allowed: features, id, input_uri, model_version, "
                                                     "prediction, score, ts)"},
        {"index": 3, "field": "features.x1", "message": "expected a finite number, got 'abc'"},
    ]
    assert "2 problem(s)" in body["error"]
    assert store.row_counts()["predictions"] == 0


def test_error_list_is_capped(api):
    r = api.post("/v1/predictions", json=[{"id": i} for i in range(120)])
    body = r.json()
    assert r.status_code == 422 and len(body["errors"]) == 50
    assert "first 50 listed" in body["error"]


def test_duplicate_ids_inside_a_batch(api, store):
    r = api.post("/v1/predictions", json=[prediction(1), prediction(1)])
    assert r.json() == {"stored": 1, "duplicates": 1}
    r = api.post("/v1/predictions", json=[prediction(5), prediction(5, score=0.9)])
    assert r.status_code == 422 and r.json()["errors"][0]["index"] == 1


def test_labels_before_predictions(api, store):
    assert api.post("/v1/labels", json=labels(["r0", "r1"])).status_code == 200
    api.post("/v1/predictions", json=predictions(3))
    frame = store.window()
    assert frame["label"].tolist()[:2] == [0, 1] and frame["label"].isna().tolist() == [False, False, True]


@pytest.mark.parametrize("body, headers, status, fragment", [
    (b"[{", {"Content-Type": "application/json"}, 400, "malformed JSON"),
    (b'[{"id": "a", "score": NaN}]', {"Content-Type": "application/json"}, 400, "send a missing value as null"),
    (b'{"id": "a", "score": Infinity}\n', NDJSON, 400, "NaN and Infinity are not JSON"),
    (b"", {"Content-Type": "application/json"}, 400, "empty body"),
    (b'{"id": "a"}\nnot json\n', NDJSON, 400, "line 2"),
    (b"[]", {"Content-Type": "text/csv"}, 415, "application/x-ndjson"),
    (b"[]", {"Content-Type": "application/json; charset=latin-1"}, 415, "UTF-8"),
    (b"[]", {"Content-Type": "application/json", "Content-Encoding": "br"}, 415, "gzip"),
    (b"\x1f\x8b garbage", {"Content-Type": "application/json", "Content-Encoding": "gzip"}, 400, "gzip"),
    (b'{"id": "a"}', {"Content-Type": "application/json"}, 422, "expected a JSON list of records"),
    (b'{"records": [], "extra": 1}', {"Content-Type": "application/json"}, 422, "unknown top-level field"),
])
def test_bad_bodies(api, store, body, headers, status, fragment):
    r = api.post("/v1/predictions", content=body, headers=headers)
    assert r.status_code == status
    assert fragment in r.text
    assert store.row_counts()["predictions"] == 0


def test_empty_batch_is_fine(api):
    assert api.post("/v1/predictions", json=[]).json() == {"stored": 0, "duplicates": 0}


def test_token_required_for_writes(base_url, store):
    with httpx.Client(base_url=base_url) as anonymous:
        r = anonymous.post("/v1/predictions", json=predictions(1))
        assert r.status_code == 401 and "Bearer" in r.json()["error"]
        assert r.headers["www-authenticate"].startswith("Bearer")
        r = anonymous.post("/v1/labels", json=labels(["a"]), headers={"Authorization": "Bearer wrong"})
        assert r.status_code == 401 and "not valid" in r.json()["error"]
        r = anonymous.post("/v1/labels", json=labels(["a"]), headers={"Authorization": f"Basic {TOKEN}"})
        assert r.status_code == 401
        assert anonymous.get("/healthz").status_code == 200  # reads stay open
        r = anonymous.post("/v1/labels", json=labels(["a"]), headers={"Authorization": f"bearer {TOKEN}"})
        assert r.status_code == 200
    assert store.row_counts() == {"predictions": 0, "labels": 1}


def test_no_token_configured_means_open(tmp_path):
    cfg = make_config(tmp_path, token=None)
    with PredictionStore.from_config(cfg) as store, serve(create_app(cfg, store)) as url:
        assert httpx.post(f"{url}/v1/predictions", json=predictions(1)).status_code == 200


def test_too_large_by_content_length(api, store):
    big = predictions(1)[0]
    big["id"] = "x" * 200
    r = api.post("/v1/predictions", json=[big] * 400)  # > 64 KiB
    assert r.status_code == 413 and "server.max_body_bytes" in r.json()["error"]
    assert store.row_counts()["predictions"] == 0


def test_too_large_when_chunked(api, store):
    chunk = b" " * 16 * 1024

    def body():
        yield b"["
        for _ in range(8):  # 128 KiB, no Content-Length: sent chunked
            yield chunk
        yield b"]"

    r = api.post("/v1/predictions", content=body(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and "after" in r.json()["error"]


def test_too_many_records(api, store):
    r = api.post("/v1/labels", json=[{"id": f"l{i}", "label": 1} for i in range(201)])
    assert r.status_code == 413 and "server.max_batch_records" in r.json()["error"]
    assert store.row_counts()["labels"] == 0


def test_gzip_bomb_is_bounded(api):
    bomb = gzip.compress(b"[" + b" " * (10 * 1024 * 1024) + b"]")  # 10 MiB inflated, ~10 KiB sent
    r = api.post("/v1/predictions", content=bomb,
                 headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert r.status_code == 413 and "decompressed" in r.json()["error"]


def test_store_busy_is_503_with_retry_after(tmp_path):
    cfg = make_config(tmp_path, token=None)
    cfg.store.busy_timeout_seconds = 0.2
    with PredictionStore.from_config(cfg) as store, serve(create_app(cfg, store)) as url:
        blocker = sqlite3.connect(store.engine.url.database, isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")  # another process holding the write lock
        try:
            r = httpx.post(f"{url}/v1/predictions", json=predictions(2), timeout=30)
            assert r.status_code == 503 and r.headers["retry-after"] == "1"
            assert "retry" in r.json()["error"]
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert httpx.post(f"{url}/v1/predictions", json=predictions(2)).json()["stored"] == 2


def test_healthz_reports_an_unreachable_store(tmp_path, postgres_server):
    import psycopg

    cfg = make_config(tmp_path, token=None)
    url = postgres_server.create_database()
    cfg.store.url = url
    with PredictionStore.from_config(cfg) as store, serve(create_app(cfg, store)) as base:
        assert httpx.get(f"{base}/healthz").json() == {"status": "ok", "model": "m", "store": "postgresql",
                                                       "checks": {"store": "ok"}}
        name = url.rsplit("/", 1)[1]
        with psycopg.connect(f"host=127.0.0.1 port={postgres_server.port} user=postgres dbname=postgres",
                             autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        r = httpx.get(f"{base}/healthz")
        assert r.status_code == 503 and r.json()["status"] == "unavailable"
        r = httpx.post(f"{base}/v1/predictions", json=predictions(1))
        assert r.status_code == 503


def test_concurrent_clients_lose_nothing(api, store, base_url):
    errors: list[str] = []

    def post(k: int) -> None:
        with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as c:
            for b in range(5):
                r = c.post("/v1/predictions", json=predictions(40, start=k * 100 + b * 20, ts=T0))
                if r.status_code != 200:
                    errors.append(r.text)

    threads = [threading.Thread(target=post, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    expected = {f"r{i}" for k in range(4) for b in range(5) for i in range(k * 100 + b * 20, k * 100 + b * 20 + 40)}
    assert set(store.window()["id"]) == expected


def test_openapi_describes_the_model(api):
    spec = api.get("/openapi.json").json()
    body = spec["paths"]["/v1/predictions"]["post"]["requestBody"]["content"]
    record = body["application/json"]["schema"]["oneOf"][0]["items"]
    assert sorted(record["properties"]["features"]["properties"]) == ["region", "x0", "x1"]
    assert "application/x-ndjson" in body
    assert "/v1/labels" in spec["paths"] and "/healthz" in spec["paths"]
    assert api.get("/docs").status_code == 200


def test_model_version_accepted_and_documented(api, store):
    r = api.post("/v1/predictions", json=[prediction(0, model_version=3), prediction(1, model_version="v3")])
    assert r.status_code == 200, r.text
    assert store.window()["model_version"].tolist() == ["3", "v3"]
    bad = api.post("/v1/predictions", json=[prediction(2, model_version={"v": 1})])
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "model_version"
    schema = api.get("/openapi.json").json()
    assert "model_version" in str(schema)
