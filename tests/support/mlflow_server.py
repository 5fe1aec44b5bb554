"""Start a real ``mlflow server`` on 127.0.0.1 for a test (SQLite backend, local artifact root).

It takes about 10 s to answer on a small machine. ``MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false`` and
``--workers 1`` keep it near 0.5 GB.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.services import Service, free_port, start_service


@dataclass
class MlflowServer(Service):
    workdir: Path = Path(".")

    def log(self) -> str:
        path = self.workdir / "mlflow-server.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""


def start_mlflow_server(workdir: Path, timeout: float = 90.0) -> MlflowServer:
    """Start ``mlflow server`` with its store under ``workdir``; returns once /health answers."""
    workdir.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{free_port()}"
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    # The server runs uvicorn workers: its own session, so that stop() ends the whole group.
    proc = start_service(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", url.rsplit(":", 1)[1],
         "--workers", "1", "--backend-store-uri", f"sqlite:///{(workdir / 'mlflow.db').resolve()}",
         "--default-artifact-root", str((workdir / "artifacts").resolve())],
        url, workdir / "mlflow-server.log", "mlflow server", ready_path="/health", timeout=timeout, env=env,
        new_session=True)
    return MlflowServer(url, proc, workdir)
