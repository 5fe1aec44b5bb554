"""Start a real Prometheus (Debian package `prometheus`) on 127.0.0.1 for a test, and query it."""
from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def require(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        # In CI scripts/setup.sh installs these; a silent skip there would hide a broken set-up.
        import os
        if os.environ.get("CI"):
            pytest.fail(f"{binary} is not installed (scripts/setup.sh installs it)")
        pytest.skip(f"{binary} is not installed; run scripts/setup.sh as root")
    return path


@dataclass
class Prometheus:
    url: str
    proc: subprocess.Popen
    workdir: Path

    def query(self, expr: str, time_: float | None = None) -> list[dict]:
        params = {"query": expr}
        if time_ is not None:
            params["time"] = str(time_)
        r = httpx.get(f"{self.url}/api/v1/query", params=params, timeout=10)
        body = r.json()
        if body.get("status") != "success":
            raise AssertionError(f"query {expr!r} failed: {body}")
        return body["data"]["result"]

    def wait_for(self, expr: str, timeout: float = 30.0, interval: float = 0.5) -> list[dict]:
        """Poll until ``expr`` returns at least one series (scrapes take a few seconds)."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(expr)
            if result or time.monotonic() > deadline:
                return result
            time.sleep(interval)

    def targets(self) -> list[dict]:
        return httpx.get(f"{self.url}/api/v1/targets", timeout=10).json()["data"]["activeTargets"]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def start_ready(argv: list[str], url: str, log_path: Path, name: str, timeout: float = 30.0) -> subprocess.Popen:
    """Start one of the Prometheus family's binaries and return once ``url``/-/ready answers 200;
    if it exits first, the error carries the end of its log."""
    proc = subprocess.Popen(argv, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited: {log_path.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"{name} did not become ready in {timeout:g} s")


@dataclass
class Alertmanager:
    url: str
    proc: subprocess.Popen

    def post(self, alerts: list[dict]) -> None:
        r = httpx.post(f"{self.url}/api/v2/alerts", json=alerts, timeout=10)
        assert r.status_code == 200, r.text

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def start_alertmanager(workdir: Path, config: dict) -> Alertmanager:
    """A real Alertmanager (Debian package ``prometheus-alertmanager``) on 127.0.0.1 with ``config``."""
    binary = require("prometheus-alertmanager")
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "alertmanager.yml").write_text(yaml.safe_dump(config))
    url = f"http://127.0.0.1:{_free_port()}"
    proc = start_ready([binary, f"--config.file={workdir / 'alertmanager.yml'}", f"--storage.path={workdir / 'data'}",
                        f"--web.listen-address={url[7:]}", "--cluster.listen-address="],
                       url, workdir / "alertmanager.log", "alertmanager")
    return Alertmanager(url, proc)


def start_prometheus(workdir: Path, scrape_targets: list[str] | None = None, config: dict | None = None,
                     scrape_interval: str = "1s", extra_args: list[str] | None = None) -> Prometheus:
    """Start Prometheus scraping ``scrape_targets`` ("127.0.0.1:PORT") every ``scrape_interval``,
    or with a full ``config`` dict. Returns once it answers /-/ready."""
    binary = require("prometheus")
    workdir.mkdir(parents=True, exist_ok=True)
    if config is None:
        config = {
            "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
            "scrape_configs": [{"job_name": "driftloop", "static_configs": [{"targets": scrape_targets or []}]}],
        }
    cfg_file = workdir / "prometheus.yml"
    cfg_file.write_text(yaml.safe_dump(config))
    url = f"http://127.0.0.1:{_free_port()}"
    proc = start_ready([binary, f"--config.file={cfg_file}", f"--storage.tsdb.path={workdir / 'data'}",
                        f"--web.listen-address={url[7:]}", "--web.enable-lifecycle", *(extra_args or [])],
                       url, workdir / "prometheus.log", "prometheus")
    return Prometheus(url, proc, workdir)
