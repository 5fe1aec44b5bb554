"""Fault injection: the daemon and ingestion driven with their dependencies failing under them
(a locked or full SQLite store, a PostgreSQL stopped mid-test, MLflow unreachable, read-only or
missing) and with hostile clients. Every case is bounded in time; all run with plain ``pytest``.

Real services throughout: the daemon served over HTTP by uvicorn, real SQLite files, a private
PostgreSQL per test that stops it, MLflow on SQLite, promtool for the alert rules.
"""
from __future__ import annotations

import os
import subprocess
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from monitor.config import DriftloopConfig, load_config
from tests.monitor.daemon.conftest import SMALL, STUB_WORKER, baseline_home, make_config, merge  # noqa: F401
from tests.support.services import free_port

TOKEN = "fault-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
FIRING = {"version": "4", "status": "firing", "receiver": "driftloop", "groupKey": "{}:{}",
          "alerts": [{"status": "firing", "labels": {"alertname": "ModelAccuracyDrop", "component": "model",
                                                      "model": "demo"},
                      "annotations": {"summary": "accuracy dropped"}, "startsAt": "2026-11-30T10:00:00Z",
                      "fingerprint": "f00d"}]}


def fault_config(home: Path, **overrides) -> DriftloopConfig:
    """Small defaults, a token, no champion needed."""
    base = merge(SMALL, {"home": str(home), "server": {"token": TOKEN, "port": free_port()}})
    return load_config(path=None, environ={}, overrides=merge(base, overrides))


@contextmanager
def running_daemon(cfg: DriftloopConfig, store=None) -> Iterator[tuple[object, str]]:
    """The daemon served over real HTTP in this process (no scheduled checks; the stand-in retrain
    child); yields (daemon, base URL)."""
    from monitor.daemon.runtime.daemon import Daemon
    from monitor.daemon.retraining.launcher import ProcessLauncher
    from monitor.daemon.runtime.serve import serve

    root = cfg.home / "retrains"
    root.mkdir(parents=True, exist_ok=True)
    (root / "behaviour").write_text("hang")
    daemon = Daemon(cfg, store=store, launcher=ProcessLauncher(root, module=STUB_WORKER))
    stop, ready = threading.Event(), threading.Event()
    thread = threading.Thread(target=serve, args=(cfg, stop), kwargs={"daemon": daemon, "ready": ready,
                                                                       "scheduler": False}, daemon=True)
    thread.start()
    assert ready.wait(60), "the daemon did not start"
    try:
        yield daemon, f"http://127.0.0.1:{cfg.server.port}"
    finally:
        stop.set()
        thread.join(30)


def assert_no_5xx_but_503(r: httpx.Response, what: str) -> None:
    """The contract under a failing dependency: 503 + Retry-After in the common error shape, or a
    normal answer; never another 5xx, never a traceback on the wire."""
    assert "Traceback" not in r.text and 'File "' not in r.text, f"{what}: traceback on the wire: {r.text[:300]}"
    assert r.status_code < 500 or r.status_code == 503, f"{what}: HTTP {r.status_code}: {r.text[:300]}"
    if r.status_code == 503:
        assert r.headers.get("retry-after"), f"{what}: 503 without Retry-After"
        body = r.json()
        assert isinstance(body.get("error"), str) and body["error"], f"{what}: 503 without the error shape: {body}"


@contextmanager
def tiny_filesystem(path: Path, size: str = "16m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``path`` (root only); skips the test where mounting is not
    permitted. ``remount(readonly)`` flips it."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tiny filesystem needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def remount(path: Path, readonly: bool) -> None:
    subprocess.run(["mount", "-o", f"remount,{'ro' if readonly else 'rw'}", str(path)], check=True)
