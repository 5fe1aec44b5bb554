"""Generated payloads against a real server: never a 5xx, and a refused batch leaves nothing behind."""
from __future__ import annotations

import itertools

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.ingest import create_app
from monitor.store import PredictionStore
from tests.monitor.ingest.conftest import TOKEN, make_config, serve

_ids = itertools.count()

json_scalar = st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) \
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8)
json_value = st.recursive(json_scalar,
                          lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                          max_leaves=6)


@st.composite
def record(draw):
    """Mostly plausible records with some fields broken, dropped or added."""
    rid = draw(st.sampled_from(["fresh", "fresh", "fresh", "reused"]))
    rec = {"id": f"f{next(_ids)}" if rid == "fresh" else "same-id",
           "features": {"x0": draw(st.floats(-1e6, 1e6)), "x1": draw(st.integers(-5, 5)),
                        "region": draw(st.sampled_from(["eu", "us"]))},
           "score": draw(st.floats(0, 1)),
           "ts": draw(st.sampled_from([None, 1_790_000_000, "2026-11-30T01:02:03Z"]))}
    if rec["ts"] is None:
        del rec["ts"]
    for _ in range(draw(st.integers(0, 2))):
        where = draw(st.sampled_from(["id", "score", "ts", "prediction", "extra", "features", "x0", "region", "drop"]))
        value = draw(json_value)
        if where in ("x0", "region"):
            if isinstance(rec.get("features"), dict):
                rec["features"][where] = value
        elif where == "drop":
            rec.pop(draw(st.sampled_from(sorted(rec))), None)
        else:
            rec[where] = value
    return rec


body = st.one_of(
    st.lists(record(), max_size=6).map(lambda rs: ("application/json", orjson.dumps(rs))),
    st.lists(record(), max_size=6).map(lambda rs: ("application/x-ndjson", b"\n".join(orjson.dumps(r) for r in rs))),
    json_value.map(lambda v: ("application/json", orjson.dumps(v))),
    st.binary(max_size=64).map(lambda b: ("application/json", b)),
    st.tuples(st.sampled_from(["application/json", "text/plain", "application/x-ndjson"]), st.binary(max_size=32)),
)


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory):
    cfg = make_config(tmp_path_factory.mktemp("fuzz"))
    store = PredictionStore.from_config(cfg)
    with serve(create_app(cfg, store)) as url, httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as client:
        yield client, store
    store.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=body, path=st.sampled_from(["/v1/predictions", "/v1/predictions", "/v1/labels"]))
def test_no_5xx_and_no_partial_batches(fuzz_server, payload, path):
    client, store = fuzz_server
    before = store.row_counts()
    content_type, data = payload
    r = client.post(path, content=data, headers={"Content-Type": content_type})
    after = store.row_counts()
    assert r.status_code < 500, r.text
    table = "predictions" if path == "/v1/predictions" else "labels"
    if r.status_code == 200:
        assert after[table] - before[table] == r.json()["stored"]
    else:
        assert 400 <= r.status_code < 500 and after == before
        body_ = r.json()
        assert isinstance(body_["error"], str) and body_["error"]
        for err in body_.get("errors", []):
            assert set(err) >= {"index", "field", "message"}
