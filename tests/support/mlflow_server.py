"""Start a real ``mlflow server`` on 127.0.0.1 for a test (SQLite backend, local artifact root).

It takes about 10 s to answer on a small machine. ``MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false`` and
``--workers 1`` keep it near 0.5 GB.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class MlflowServer:
    url: str
    proc: subprocess.Popen
    workdir: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            # The server runs uvicorn in its own process group: end the group, not just the parent.
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)

    def log(self) -> str:
        path = self.workdir / "mlflow-server.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""


def start_mlflow_server(workdir: Path, timeout: float = 90.0) -> MlflowServer:
    """Start ``mlflow server`` with its store under ``workdir``; returns once /health answers."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    log = open(workdir / "mlflow-server.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{(workdir / 'mlflow.db').resolve()}",
         "--default-artifact-root", str((workdir / "artifacts").resolve())],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    server = MlflowServer(f"http://127.0.0.1:{port}", proc, workdir)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mlflow server exited with {proc.returncode}: {server.log()}")
        try:
            if httpx.get(f"{server.url}/health", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    server.stop()
    raise RuntimeError(f"mlflow server did not answer /health within {timeout:.0f} s: {server.log()}")
