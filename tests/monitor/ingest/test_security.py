"""The pieces the daemon reuses: ``require_token`` on its own routers, and the body-size limit."""
from __future__ import annotations

import httpx
import pytest
from fastapi import APIRouter, Depends

from monitor.ingest import create_app
from monitor.ingest.security import require_token, token_matches
from tests.monitor.ingest.conftest import TOKEN, serve


@pytest.mark.parametrize("expected, header, ok", [
    (None, None, True),
    ("", "anything", True),
    ("t0k", None, False),
    ("t0k", "Bearer t0k", True),
    ("t0k", "bearer  t0k ", True),
    ("t0k", "Bearer t0K", False),
    ("t0k", "Bearer t0k2", False),
    ("t0k", "Basic t0k", False),
    ("t0k", "t0k", False),
    ("t0k", "Bearer ", False),
])
def test_token_matches(expected, header, ok):
    assert token_matches(expected, header) is ok


def test_a_router_added_by_another_part_gets_token_and_size_limit(cfg, store):
    app = create_app(cfg, store)
    router = APIRouter(prefix="/v1")

    @router.post("/retrain", dependencies=[Depends(require_token)])
    def retrain(body: dict) -> dict:
        return {"accepted": body}

    @router.get("/status")
    def status() -> dict:
        return {"ok": True}

    app.include_router(router)
    with serve(app) as url:
        assert httpx.post(f"{url}/v1/retrain", json={"a": 1}).status_code == 401
        ok = httpx.post(f"{url}/v1/retrain", json={"a": 1}, headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200 and ok.json() == {"accepted": {"a": 1}}
        assert httpx.get(f"{url}/v1/status").json() == {"ok": True}
        big = httpx.post(f"{url}/v1/retrain", json={"a": "x" * 100_000}, headers={"Authorization": f"Bearer {TOKEN}"})
        assert big.status_code == 413
        metrics = httpx.get(f"{url}/metrics").text
        # 413s of other routes are not counted as ingestion rejections.
        assert 'driftloop_ingest_rejected_total{kind="prediction",model="m",reason="too_large"} 0.0' in metrics
