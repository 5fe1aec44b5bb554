"""Large request bodies over HTTP: read a chunk at a time, they are answered exactly as when read
whole; a refused one leaves nothing behind for the garbage collector; and memory is given back
after bodies that were large only once inflated (monitor/ingest/memory.py)."""
from __future__ import annotations

import gc
import gzip
import time
import weakref

import httpx
import orjson
import pytest

from monitor.ingest import create_app, memory, parsing
from monitor.store import PredictionStore
from tests.monitor.ingest.conftest import TOKEN, make_config, serve
from tests.monitor.store.factories import labels, prediction, predictions

AUTH = {"Authorization": f"Bearer {TOKEN}"}
MiB = 2**20


@pytest.fixture
def served(tmp_path):
    """``served(name)``: the base URL of a fresh app and store taking 4 MiB bodies of 100,000 records."""
    with_stores = []

    def start(name: str):
        cfg = make_config(tmp_path / name, max_body_bytes=4 * MiB, max_batch_records=100_000)
        store = PredictionStore.from_config(cfg)
        with_stores.append(store)
        return serve(create_app(cfg, store))
    yield start
    for store in with_stores:
        store.close()


def conversation() -> list[tuple[str, bytes, dict]]:
    """Requests with large bodies (256 KiB and more here): stored, repeated, conflicting, refused,
    inflated, NDJSON, labels."""
    batch = predictions(3000)
    bad = predictions(3000, prefix="b")
    bad[10]["score"], bad[2500]["features"]["region"] = 2, 7
    changed = [dict(r) for r in batch]
    changed[2345] = prediction(2345, score=0.99)
    json_type = {"Content-Type": "application/json"}
    return [("/v1/predictions", orjson.dumps(batch), json_type),
            ("/v1/predictions", orjson.dumps({"records": batch}), json_type),  # all duplicates
            ("/v1/predictions", orjson.dumps(changed), json_type),  # 409 naming index 4321
            ("/v1/predictions", orjson.dumps(bad), json_type),  # 422 naming two records
            ("/v1/predictions", orjson.dumps({"records": bad, "extra": 1}), json_type),
            ("/v1/predictions", orjson.dumps(batch)[:-9], json_type),  # malformed: 400
            ("/v1/predictions", gzip.compress(orjson.dumps(predictions(3000, prefix="g"))),
             {**json_type, "Content-Encoding": "gzip"}),
            ("/v1/predictions", b"\n".join(orjson.dumps(r) for r in predictions(3000, prefix="n")),
             {"Content-Type": "application/x-ndjson"}),
            ("/v1/labels", orjson.dumps(labels([f"r{i}" for i in range(12000)])), json_type)]


def test_large_bodies_are_answered_as_when_read_whole(served, monkeypatch):
    answers = {}
    for mode, chunked in (("whole", 1 << 40), ("chunks", 256 * 1024)):
        monkeypatch.setattr(parsing, "CHUNKED_BYTES", chunked)
        monkeypatch.setattr(parsing, "CHUNK_BYTES", 32 * 1024)
        with served(mode) as url, httpx.Client(base_url=url, headers=AUTH, timeout=60) as client:
            answers[mode] = [(r.status_code, r.json()) for r in
                             (client.post(path, content=body, headers=headers)
                              for path, body, headers in conversation())]
    assert [status for status, _ in answers["chunks"]] == [200, 200, 409, 422, 422, 400, 200, 200, 200]
    assert answers["chunks"] == answers["whole"]
    assert answers["chunks"][1][1] == {"stored": 0, "duplicates": 3000}
    assert all(len(body) >= 256 * 1024 for _, body, headers in conversation() if "Content-Encoding" not in headers)


@pytest.fixture
def no_collection(monkeypatch):
    """No garbage collection (nor the release after large bodies, which collects): what is freed
    is freed by reference counting alone."""
    monkeypatch.setattr(memory, "release", lambda: True)
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def test_a_refused_large_body_leaves_no_cycle_holding_its_columns(served, monkeypatch, no_collection):
    made: list[weakref.ref] = []

    class Watched(parsing.ChunkedBody):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(weakref.ref(self))

    monkeypatch.setattr(parsing, "ChunkedBody", Watched)
    monkeypatch.setattr(parsing, "CHUNK_BYTES", 32 * 1024)
    bad = predictions(12000)
    bad[11999]["score"] = 2  # refused once every chunk is checked
    with served("refused") as url:
        r = httpx.post(url + "/v1/predictions", content=orjson.dumps(bad), timeout=60,
                       headers={**AUTH, "Content-Type": "application/json"})
        assert r.status_code == 422 and r.json()["errors"][0]["index"] == 11999
        deadline = time.monotonic() + 5
        while made[0]() is not None and time.monotonic() < deadline:  # the worker may still be unwinding
            time.sleep(0.05)
    assert len(made) == 1 and made[0]() is None, "the refused body's chunks are still referenced"


@pytest.mark.parametrize("records, released", [(12000, 1), (100, 0)], ids=["inflates past 1 MiB", "small"])
def test_memory_is_given_back_after_a_gzip_body_that_inflates_large(served, monkeypatch, records, released):
    calls = []
    monkeypatch.setattr(memory, "release", lambda: calls.append(1) or True)
    body = gzip.compress(orjson.dumps(predictions(records)))
    assert len(body) < memory.LARGE_BODY_BYTES
    with served("gzip") as url:
        r = httpx.post(url + "/v1/predictions", content=body, timeout=60,
                       headers={**AUTH, "Content-Type": "application/json", "Content-Encoding": "gzip"})
        assert r.status_code == 200
        time.sleep(0.3)  # the release runs in a worker thread once the answer is sent
    assert len(calls) == released


def test_the_allocator_thresholds_are_fixed_where_the_c_library_is_glibc():
    import platform
    took = memory.tune_allocator()
    assert took == (platform.libc_ver()[0] == "glibc")
