"""Strict decoding: a gzip stream cut short or followed by junk, and empty NDJSON, are refused
whole (400, nothing stored); the OpenAPI document resolves and declares what the server answers."""
from __future__ import annotations

import gzip
import json
import zlib

import httpx
import pytest

from tests.faults.conftest import AUTH, fault_config, running_daemon
from tests.faults.test_dependencies import prediction

NDJSON = {**AUTH, "Content-Type": "application/x-ndjson"}


def flushed_gzip(lines: list[bytes]) -> tuple[bytes, list[int]]:
    """gzip with a flush after each line (as a streaming client writes it); also the offsets
    where each line's compressed bytes end."""
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out, ends = b"", []
    for line in lines:
        out += c.compress(line) + c.flush(zlib.Z_SYNC_FLUSH)
        ends.append(len(out))
    return out + c.flush(), ends


@pytest.fixture(scope="module")
def daemon_url(tmp_path_factory):
    cfg = fault_config(tmp_path_factory.mktemp("decoding") / "home")
    with running_daemon(cfg) as (daemon, url):
        yield daemon, url


def test_truncated_and_trailing_gzip_and_empty_ndjson_are_400(daemon_url):
    daemon, url = daemon_url
    lines = [json.dumps(prediction(i)).encode() + b"\n" for i in range(100)]
    body, ends = flushed_gzip(lines)
    gz = {**NDJSON, "Content-Encoding": "gzip"}
    with httpx.Client(base_url=url, timeout=30) as c:
        r = c.post("/v1/predictions", content=body[:ends[39]], headers=gz)  # cut after line 40
        assert r.status_code == 400 and "incomplete" in r.json()["error"], r.text
        r = c.post("/v1/predictions", content=body + b"junk", headers=gz)
        assert r.status_code == 400 and "trailing data" in r.json()["error"], r.text
        for empty in (b"", b"\n\n", b"  \n \r\n"):
            r = c.post("/v1/predictions", content=empty, headers=NDJSON)
            assert r.status_code == 400 and "empty body" in r.json()["error"], (empty, r.text)
        r = c.post("/v1/labels", content=b"", headers=NDJSON)
        assert r.status_code == 400 and "empty body" in r.json()["error"]
        assert daemon.store.row_counts() == {"predictions": 0, "labels": 0}  # nothing of any of them
        # Two whole gzip members are one valid body (RFC 1952), and the whole stream stores all 100.
        r = c.post("/v1/predictions", content=gzip.compress(b"".join(lines[:50])) + gzip.compress(b"".join(lines[50:])),
                   headers=gz)
        assert r.json() == {"stored": 100, "duplicates": 0}
        assert c.post("/v1/predictions", content=body, headers=gz).json() == {"stored": 0, "duplicates": 100}


def test_openapi_resolves_and_declares_the_answers(daemon_url):
    _, url = daemon_url
    spec = httpx.get(f"{url}/openapi.json", timeout=10).json()
    assert "$defs" not in json.dumps(spec)  # every $ref resolves inside the document
    paths = spec["paths"]
    for path in ("/v1/alerts", "/v1/retrain"):
        assert {"400", "401", "422", "503"} <= set(paths[path]["post"]["responses"]), path
    assert {"422", "503"} <= set(paths["/v1/status"]["get"]["responses"])
    assert list(paths["/metrics"]["get"]["responses"]["200"]["content"]) == ["text/plain"]
    record = (paths["/v1/predictions"]["post"]["requestBody"]["content"]["application/json"]["schema"]["oneOf"][0]
              ["items"])
    assert {"type": "null"} in record["properties"]["ts"]["anyOf"]
    assert {"type": "null"} in record["properties"]["prediction"]["anyOf"]
    assert any(s.get("exclusiveMaximum") for s in record["properties"]["ts"]["anyOf"])
    alert = paths["/v1/alerts"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert alert["properties"]["alerts"]["items"]["properties"]["startsAt"]
    assert {"/livez", "/readyz", "/healthz"} <= set(paths)
