"""The ingestion server's garbage-collector sizing (monitor.ingest.memory.size_collector)."""
from __future__ import annotations

import gc

import pytest

from monitor.ingest import memory


@pytest.fixture
def thresholds():
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def test_the_first_threshold_is_raised_and_the_older_ones_kept(thresholds):
    gc.set_threshold(700, 10, 10)
    assert memory.size_collector() == (memory.GEN0_THRESHOLD, 10, 10)


def test_a_higher_threshold_is_never_lowered_and_a_disabled_collector_stays_off(thresholds):
    gc.set_threshold(200_000, 5, 7)
    assert memory.size_collector() == (200_000, 5, 7)
    gc.set_threshold(0, 10, 10)
    assert memory.size_collector() == (0, 10, 10)


def test_creating_the_ingest_app_sizes_the_collector(thresholds, tmp_path):
    from monitor.config import load_config
    from monitor.ingest import create_app
    from monitor.store import PredictionStore
    gc.set_threshold(700, 10, 10)
    model = {"name": "m", "features": [{"name": "x"}]}
    cfg = load_config(environ={}, overrides={"home": str(tmp_path), "model": model})
    with PredictionStore.from_config(cfg) as store:
        create_app(cfg, store)
    assert gc.get_threshold()[0] == memory.GEN0_THRESHOLD
