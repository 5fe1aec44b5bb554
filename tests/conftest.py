"""Fixtures shared by every test. Area-specific fixtures live in the area's own conftest.py;
launchers for real services (Prometheus, PostgreSQL, MLflow server) in tests/support/."""
from __future__ import annotations

import pytest

from monitor.config import DriftloopConfig, load_config
from tests.support.services import free_port


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def config(tmp_path) -> DriftloopConfig:
    """Defaults with everything embedded under a fresh temporary home; no environment leaks in."""
    return load_config(path=None, environ={}, overrides={"home": str(tmp_path / "home")})
