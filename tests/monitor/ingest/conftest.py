"""Ingestion tests talk HTTP to a real uvicorn server on a free port (in a thread), backed by a
real SQLite store."""
from __future__ import annotations

import socket
import threading
from contextlib import contextmanager
from typing import Iterator

import httpx
import pytest
import uvicorn

from monitor.config import DriftloopConfig, load_config
from monitor.ingest import create_app
from monitor.store import PredictionStore
from tests.support.postgres import postgres_server  # noqa: F401  (session fixture)
from tests.support.waiting import wait_until

TOKEN = "s3cret-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(app) -> Iterator[str]:
    """Run ``app`` with uvicorn on 127.0.0.1 in a thread; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False, lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()

    def started() -> bool:
        assert thread.is_alive(), "uvicorn exited during start-up"
        return server.started

    wait_until(started, 15, 0.01, "uvicorn did not start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def make_config(home, model: dict | None = None, **server) -> DriftloopConfig:
    """The ingestion tests' config: a binary model of x0, x1 and region unless ``model`` says
    otherwise (keys of it replace the defaults: ``{"task": "regression"}``)."""
    model = {"name": "m", "features": [{"name": "x0"}, {"name": "x1"}, {"name": "region", "type": "categorical"}],
             **(model or {})}
    return load_config(environ={}, overrides={"home": str(home), "model": model,
                                              "server": {"token": TOKEN, "max_body_bytes": 64 * 1024,
                                                         "max_batch_records": 200, **server}})


@pytest.fixture
def cfg(tmp_path) -> DriftloopConfig:
    return make_config(tmp_path / "home")


@pytest.fixture
def store(cfg):
    store = PredictionStore.from_config(cfg)
    yield store
    store.close()


@pytest.fixture
def base_url(cfg, store) -> Iterator[str]:
    with serve(create_app(cfg, store)) as url:
        yield url


@pytest.fixture
def api(base_url) -> Iterator[httpx.Client]:
    """An HTTP client with the token."""
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as client:
        yield client
