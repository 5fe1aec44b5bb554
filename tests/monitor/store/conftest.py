"""Store tests run against SQLite and a real PostgreSQL (started once per session)."""
from __future__ import annotations

import pytest

from monitor.store import PredictionStore
from tests.monitor.store.factories import small_model
from tests.support.postgres import postgres_server  # noqa: F401  (session fixture)


class Clock:
    def __init__(self, t: float = 1_790_100_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("postgres_server").create_database()


@pytest.fixture
def open_store(store_url, clock):
    """Open stores on ``store_url`` (default model: tests' small one); all closed afterwards."""
    opened: list[PredictionStore] = []

    def make(model=None, url: str | None = None, **kwargs) -> PredictionStore:
        kwargs.setdefault("clock", clock)
        store = PredictionStore(url or store_url, model or small_model(), **kwargs)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store) -> PredictionStore:
    return open_store()


@pytest.fixture
def open_sqlite_store(tmp_path, clock):
    """Like ``open_store``, for tests about SQLite only (one file per test)."""
    opened: list[PredictionStore] = []

    def make(**kwargs) -> PredictionStore:
        kwargs.setdefault("clock", clock)
        store = PredictionStore(f"sqlite:///{tmp_path / 'only.db'}", small_model(), **kwargs)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()
