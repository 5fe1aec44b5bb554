"""Generated multiclass and regression payloads against a real server: never a 5xx, a refused batch
leaves nothing behind, and every refusal names the record and field."""
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
from tests.monitor.ingest.test_fuzz import json_value

CLASSES = ["bird", "cat", "dog"]
_ids = itertools.count()


@st.composite
def record(draw, task: str):
    """Mostly valid records of ``task``, with some outputs or labels broken, dropped or added."""
    rec: dict = {"id": f"f{next(_ids)}", "features": {"x0": draw(st.floats(-1e6, 1e6)), "x1": draw(st.integers(-5, 5)),
                                                      "region": draw(st.sampled_from(["eu", "us"]))}}
    if task == "multiclass":
        weights = draw(st.lists(st.floats(0.01, 1), min_size=3, max_size=3))
        proba = [w / sum(weights) for w in weights]
        rec["probabilities"] = draw(st.sampled_from([proba, dict(zip(CLASSES, proba))]))
        rec["prediction"] = draw(st.sampled_from([None, *CLASSES]))
        label = draw(st.sampled_from(CLASSES))
    else:
        rec["prediction"] = draw(st.floats(-1e9, 1e9))
        label = draw(st.floats(-1e9, 1e9))
    for _ in range(draw(st.integers(0, 2))):
        where = draw(st.sampled_from(["probabilities", "prediction", "score", "label", "drop"]))
        if where == "drop":
            rec.pop(draw(st.sampled_from(sorted(rec))), None)
        elif where == "label":
            label = draw(json_value)
        elif where == "probabilities" and task == "multiclass" and draw(st.booleans()):
            rec[where] = draw(st.dictionaries(st.sampled_from([*CLASSES, "eel", "1"]), json_value, max_size=4))
        else:
            rec[where] = draw(json_value)
    return rec, {"id": rec.get("id", "x"), "label": label}


@pytest.fixture(scope="module", params=["multiclass", "regression"])
def fuzz_server(request, tmp_path_factory):
    task = request.param
    model = {"task": task, **({"classes": CLASSES} if task == "multiclass" else {})}
    cfg = make_config(tmp_path_factory.mktemp("fuzz"), model=model)
    store = PredictionStore.from_config(cfg)
    with serve(create_app(cfg, store)) as url, httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as client:
        yield task, client, store
    store.close()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), ndjson=st.booleans())
def test_no_5xx_and_no_partial_batches(fuzz_server, data, ndjson):
    task, client, store = fuzz_server
    pairs = data.draw(st.lists(record(task), max_size=5))
    for path, records in (("/v1/predictions", [p for p, _ in pairs]), ("/v1/labels", [lab for _, lab in pairs])):
        before = store.row_counts()
        body = b"\n".join(orjson.dumps(r) for r in records) if ndjson else orjson.dumps(records)
        kind = "application/x-ndjson" if ndjson else "application/json"
        r = client.post(path, content=body, headers={"Content-Type": kind})
        after = store.row_counts()
        assert r.status_code < 500, r.text
        table = "predictions" if path == "/v1/predictions" else "labels"
        if r.status_code == 200:
            assert after[table] - before[table] == r.json()["stored"]
        else:
            assert 400 <= r.status_code < 500 and after == before, r.text
            for err in r.json().get("errors", []):
                assert set(err) >= {"index", "field", "message"} and err["field"]
