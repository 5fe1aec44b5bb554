from __future__ import annotations

import pytest

from monitor.gpu import GpuCollector, GpuSession
from monitor.gpu.fake import FakeBackend
from tests.monitor.gpu.helpers import ManualClock, Scrape


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def fake():
    backend = FakeBackend(gpus=2)
    yield backend
    backend.release_all()  # never leave a lane thread blocked in a "hung" call


@pytest.fixture
def make_collector(clock):
    """Build a collector over a backend with the manual clock; lanes are closed after the test."""
    sessions = []

    def make(backend, *, call_timeout: float = 2.0, retry_initial: float = 1.0, retry_max: float = 8.0,
             **kwargs) -> GpuCollector:
        session = GpuSession(backend, clock=clock, retry_initial_seconds=retry_initial, retry_max_seconds=retry_max)
        sessions.append(session)
        return GpuCollector(session, call_timeout_seconds=call_timeout, **kwargs)

    yield make
    for s in sessions:
        getattr(s.backend, "release_all", lambda: None)()
        s.lanes.close()


def scrape(collector: GpuCollector) -> Scrape:
    return Scrape(collector.collect())


@pytest.fixture
def collect():
    return scrape
