"""Start a real Prometheus (Debian package `prometheus`) on 127.0.0.1 for a test, and query it."""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from tests.support.services import Service, free_port, start_service
from tests.support.waiting import wait_until


def require(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        # In CI scripts/setup.sh installs these; a silent skip there would hide a broken set-up.
        if os.environ.get("CI"):
            pytest.fail(f"{binary} is not installed (scripts/setup.sh installs it)")
        pytest.skip(f"{binary} is not installed; run scripts/setup.sh as root")
    return path


@dataclass
class Prometheus(Service):
    workdir: Path = Path(".")

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
        try:
            return wait_until(lambda: self.query(expr), timeout, interval)
        except AssertionError:
            return []

    def targets(self) -> list[dict]:
        return httpx.get(f"{self.url}/api/v1/targets", timeout=10).json()["data"]["activeTargets"]



class Alertmanager(Service):
    def post(self, alerts: list[dict]) -> None:
        r = httpx.post(f"{self.url}/api/v2/alerts", json=alerts, timeout=10)
        assert r.status_code == 200, r.text


def start_alertmanager(workdir: Path, config: dict) -> Alertmanager:
    """A real Alertmanager (Debian package ``prometheus-alertmanager``) on 127.0.0.1 with ``config``."""
    binary = require("prometheus-alertmanager")
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "alertmanager.yml").write_text(yaml.safe_dump(config))
    url = f"http://127.0.0.1:{free_port()}"
    proc = start_service([binary, f"--config.file={workdir / 'alertmanager.yml'}", f"--storage.path={workdir / 'data'}",
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
    url = f"http://127.0.0.1:{free_port()}"
    proc = start_service([binary, f"--config.file={cfg_file}", f"--storage.tsdb.path={workdir / 'data'}",
                        f"--web.listen-address={url[7:]}", "--web.enable-lifecycle", *(extra_args or [])],
                       url, workdir / "prometheus.log", "prometheus")
    return Prometheus(url, proc, workdir)
