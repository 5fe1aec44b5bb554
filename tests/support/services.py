"""Start real services for tests (Prometheus, Alertmanager, mlflow server) and wait until they answer.

Every launcher binds 127.0.0.1 on a free port, logs to a file in its work folder, and reports the
end of that log when the service exits or never becomes ready.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Service:
    url: str
    proc: subprocess.Popen

    def stop(self) -> None:
        """SIGTERM (to the whole process group when the service leads its own), then SIGKILL."""
        if self.proc.poll() is not None:
            return
        group = os.getpgid(self.proc.pid) == self.proc.pid
        send = (lambda sig: os.killpg(self.proc.pid, sig)) if group else self.proc.send_signal
        send(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            send(signal.SIGKILL)
            self.proc.wait(5)


def start_service(argv: list[str], url: str, log_path: Path, name: str, *, ready_path: str = "/-/ready",
                  timeout: float = 30.0, env: dict[str, str] | None = None,
                  new_session: bool = False) -> subprocess.Popen:
    """Start ``argv`` and return once ``url + ready_path`` answers 200."""
    proc = subprocess.Popen(argv, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT, env=env,
                            start_new_session=new_session)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}: {log_path.read_text(errors='replace')[-2000:]}")
        try:
            if httpx.get(f"{url}{ready_path}", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    Service(url, proc).stop()
    raise RuntimeError(f"{name} did not answer {ready_path} within {timeout:g} s: "
                       f"{log_path.read_text(errors='replace')[-2000:]}")
