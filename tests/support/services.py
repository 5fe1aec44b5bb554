"""Start real services for tests (Prometheus, Alertmanager, mlflow server) and wait until they answer.

Every launcher binds 127.0.0.1 on a free port, logs to a file in its work folder, and reports the
end of that log when the service exits or never becomes ready.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import httpx

from tests.support.waiting import wait_until


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

    try:
        wait_answering(f"{url}{ready_path}", proc, lambda: log_path.read_text(errors="replace")[-2000:],
                       timeout, name=name)
    except AssertionError as exc:
        Service(url, proc).stop()
        raise RuntimeError(str(exc)) from None
    return proc


def wait_answering(url: str, proc: subprocess.Popen, log: Callable[[], str], timeout: float = 90.0,
                   name: str = "the service") -> None:
    """Wait until ``url`` answers 200 while ``proc`` runs; fail at once, with ``log()``, if it exits."""
    def ready() -> bool:
        assert proc.poll() is None, f"{name} exited with {proc.returncode}:\n{log()}"
        return httpx.get(url, timeout=1).status_code == 200

    wait_until(ready, timeout, 0.2, lambda: f"{name} did not answer {url}:\n{log()}", ignoring=(httpx.HTTPError,))
