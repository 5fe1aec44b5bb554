"""``driftloop serve`` as a real process: HTTP, /metrics, SIGTERM, and SIGKILL mid-retrain."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from monitor.store import PredictionStore
from tests.conftest import free_port
from tests.monitor.daemon.conftest import Traffic
from tests.support.prometheus import require
from tests.support.services import wait_answering
from tests.support.waiting import wait_until


# The console script's entry point (``python -m monitor.cli`` would import monitor.cli twice).
DRIFTLOOP = [sys.executable, "-c", "import sys; from monitor.cli import main; sys.exit(main(sys.argv[1:]))"]


class Served:
    def __init__(self, cfg, workdir: Path, token: str | None = None):
        self.cfg = cfg
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config_file = workdir / "driftloop.yaml"
        self.config_file.write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
        self.log_path = workdir / f"serve-{self.port}.log"
        self.token = token
        self.proc: subprocess.Popen | None = None

    def start(self, *flags: str) -> "Served":
        env = {**os.environ, "PYTHONPATH": os.getcwd()}
        if self.token:
            env["DRIFTLOOP_SERVER__TOKEN"] = self.token
        self.proc = subprocess.Popen(
            [*DRIFTLOOP, "--config", str(self.config_file), "serve", "--port", str(self.port), "--no-gpu", *flags],
            stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT, env=env)
        wait_answering(self.url + "/healthz", self.proc, self.log, 90, name="serve")
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def served(tmp_path):
    made = []

    def make(cfg, token=None):
        s = Served(cfg, tmp_path, token)
        made.append(s)
        return s
    yield make
    for s in made:
        s.stop()


def rows(cfg, sql: str) -> list[tuple]:
    with sqlite3.connect(cfg.home / "driftloop.db") as conn:
        return conn.execute(sql).fetchall()


def running_mlflow_runs(cfg) -> list:
    from mlflow import MlflowClient
    client = MlflowClient(tracking_uri=cfg.tracking_uri)
    experiment = client.get_experiment_by_name(cfg.experiment_name)
    # Training runs only: the champion's monitoring run is RUNNING from the first check on.
    return [] if experiment is None else client.search_runs(
        [experiment.experiment_id], "attributes.status = 'RUNNING' and tags.`driftloop.kind` = 'retrain'")


def test_serve_answers_and_stops_cleanly_on_sigterm(make_config, served):
    cfg = make_config(with_champion=False)
    daemon = served(cfg, token="s3cret-token").start("--check-interval", "3600")
    # The first check runs a second after start.
    wait_until(lambda: rows(cfg, "SELECT status FROM check_results"), 60, 0.2, daemon.log)
    # The daemon alone in its process freezes its startup heap; with no champion, nothing more.
    assert "heap: froze" in daemon.log_path.read_text() and "heap: imported" not in daemon.log_path.read_text()
    r = httpx.get(daemon.url + "/metrics", timeout=10)
    assert r.status_code == 200
    promtool = require("promtool")
    lint = subprocess.run([promtool, "check", "metrics"], input=r.content, capture_output=True)
    assert lint.returncode == 0, lint.stdout.decode() + lint.stderr.decode()
    assert 'driftloop_model_check_state{model="demo",state="no_champion"} 1.0' in r.text
    assert 'driftloop_incidents_open{model="demo"} 0.0' in r.text
    assert "driftloop_retrains_total" in r.text and "driftloop_ingest_records_total" in r.text
    # What Prometheus users expect of any target: the process, Python and build series.
    for series in ("process_resident_memory_bytes ", "process_open_fds ", "python_info{",
                   'driftloop_build_info{component="serve"'):
        assert series in r.text, series
    # Writes need the token; reads do not.
    assert httpx.post(daemon.url + "/v1/retrain", timeout=10).status_code == 401
    status = httpx.get(daemon.url + "/v1/status", timeout=10).json()
    assert status["champion"]["version"] is None and status["last_check"]["status"] == "no_champion"
    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.proc.wait(30) == 0, daemon.log()
    assert "stopped" in daemon.log() and "Traceback" not in daemon.log()


def test_sigkill_mid_retrain_loses_nothing_and_promotes_once(make_config, served):
    cfg = make_config()
    with PredictionStore.from_config(cfg) as store:
        Traffic(cfg, store).send(1500, 90, concept=1.0)
    daemon = served(cfg).start("--check-interval", "3600")  # the first check runs a second after start
    wait_until(lambda: rows(cfg, "SELECT id, pid FROM retrain_attempts WHERE status = 'running' AND pid IS NOT NULL"),
               60, 0.2, daemon.log)
    [(attempt_id, child_pid)] = rows(cfg, "SELECT id, pid FROM retrain_attempts")
    # Mid-retrain: the child has opened its MLflow run and is training.
    wait_until(lambda: running_mlflow_runs(cfg), 120, 0.2, daemon.log)
    assert Path(f"/proc/{child_pid}").exists(), "the retrain child finished before the kill"
    daemon.proc.send_signal(signal.SIGKILL)
    daemon.proc.wait()
    # The child's watchdog notices its parent is gone.
    wait_until(lambda: not Path(f"/proc/{child_pid}").exists(), 10, 0.1, "the retrain child outlived its daemon")
    [(incident_id, state)] = rows(cfg, "SELECT id, state FROM incidents")
    assert state == "retraining"

    restarted = served(cfg).start("--check-interval", "3600")

    def settled() -> bool:
        assert restarted.proc.poll() is None, restarted.log()
        return rows(cfg, f"SELECT state FROM incidents WHERE id = '{incident_id}'")[0][0] in ("promoted", "rejected")

    wait_until(settled, 300, 0.5, restarted.log)
    # Its first check had a champion: the check path is imported and frozen (monitor/daemon/runtime/heap.py).
    wait_until(lambda: "heap: imported the check path" in restarted.log_path.read_text(), 90, 0.5, restarted.log)
    attempts = rows(cfg, "SELECT id, status FROM retrain_attempts ORDER BY started_at")
    # Interrupted (not failed: no cooldown, not counted) and retried at once (monitor.daemon.retraining.failover).
    assert attempts[0] == (attempt_id, "interrupted") and [s for _, s in attempts] == ["interrupted", "promoted"]
    assert [r[0] for r in rows(cfg, "SELECT id FROM incidents")] == [incident_id]  # the same incident
    from mlflow import MlflowClient
    tags = MlflowClient(tracking_uri=cfg.tracking_uri).get_registered_model(cfg.registered_model_name).tags
    history = json.loads(tags["driftloop.champion_history"])
    assert len(history) == 2 and history[0] == "1", history  # exactly one promotion
    status = httpx.get(restarted.url + "/v1/status", timeout=10).json()
    assert status["champion"]["version"] == history[-1]
    restarted.proc.send_signal(signal.SIGTERM)
    assert restarted.proc.wait(30) == 0, restarted.log()


@pytest.mark.parametrize("host,loopback", [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                           ("0.0.0.0", False), ("::", False), ("10.0.0.5", False), ("myhost", False)])
def test_only_loopback_binds_are_quiet_without_a_token(host, loopback):
    from monitor.daemon.runtime.serve import _loopback
    assert _loopback(host) is loopback
