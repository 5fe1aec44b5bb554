"""Models added, removed and changed on reload (SIGHUP) without touching the others; a model that
cannot run is reported while the others run."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess

import httpx
import yaml

from monitor.config import load_config
from tests.conftest import free_port
from tests.monitor.daemon.test_serve import DRIFTLOOP
from tests.support.services import wait_answering
from tests.support.waiting import wait_until

NUMERIC = [{"name": "x", "type": "numeric"}]
TEXT = [{"name": "x", "type": "categorical"}]


def write_models(folder, models: dict) -> None:
    folder.mkdir(exist_ok=True)
    for old in folder.glob("*.yaml"):
        if old.stem not in models:
            old.unlink()
    for name, sections in models.items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(sections))


async def _post(app, *paths: str) -> list[httpx.Response]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dl") as http:
        return [await http.post(path, json=[]) for path in paths]


def test_reload_starts_new_models_stops_removed_ones_and_leaves_the_others_alone(tmp_path):
    from monitor.daemon.runtime.fleet import Fleet
    from monitor.daemon.runtime.fleet_http import FleetApp

    config = tmp_path / "driftloop.yaml"
    config.write_text(yaml.safe_dump({"home": str(tmp_path / "home"), "models_dir": "models",
                                      "server": {"gpu_metrics": False}}))
    write_models(tmp_path / "models", {"a": {"model": {"features": NUMERIC}}, "b": {"model": {"features": NUMERIC}}})
    fleet = Fleet(load_config(config, environ={}))
    fleet.start(scheduler=False)
    try:
        a, b = fleet.daemons["a"], fleet.daemons["b"]
        write_models(tmp_path / "models", {"b": {"model": {"features": NUMERIC}},
                                           "c": {"model": {"task": "regression", "features": NUMERIC}}})
        done = fleet.reload(load_config(config, environ={}))
        assert done == {"added": ["c"], "removed": ["a"], "changed": [], "unchanged": ["b"]}
        assert fleet.daemons["b"] is b and not a._started and fleet.daemons["c"].cfg.model.task == "regression"
        # b's stored feature becomes text: its tables cannot take it; b stops, c runs on.
        write_models(tmp_path / "models", {"b": {"model": {"features": TEXT}},
                                           "c": {"model": {"task": "regression", "features": NUMERIC}}})
        done = fleet.reload(load_config(config, environ={}))
        assert done["changed"] == ["b"] and done["unchanged"] == ["c"]
        assert "b" not in fleet.daemons and "feature types changed" in fleet.failed["b"]
        listing = {m["name"]: m for m in fleet.listing()["models"]}
        assert listing["b"]["state"] == "failed" and listing["c"]["state"] == "running"
        r, unknown = asyncio.run(_post(FleetApp(fleet), "/v1/models/b/predictions", "/v1/models/zz/predictions"))
        assert r.status_code == 503 and "did not start" in r.json()["error"]   # the daemon's fault, not the data's
        assert "feature types changed" in r.json()["error"] and unknown.status_code == 404
        # Put it back as it was: it runs again.
        write_models(tmp_path / "models", {"b": {"model": {"features": NUMERIC}}})
        done = fleet.reload(load_config(config, environ={}))
        assert done["removed"] == ["c"] and "b" in fleet.daemons and fleet.failed == {}
    finally:
        fleet.stop()


def test_sighup_rereads_the_models_of_a_running_daemon(tmp_path):
    port = free_port()
    config = tmp_path / "driftloop.yaml"
    config.write_text(yaml.safe_dump({"home": str(tmp_path / "home"), "models_dir": "models"}))
    write_models(tmp_path / "models", {"churn": {"model": {"features": NUMERIC}}})
    log = tmp_path / "serve.log"
    proc = subprocess.Popen([*DRIFTLOOP, "--config", str(config), "serve", "--port", str(port), "--no-gpu"],
                            stdout=open(log, "ab"), stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": os.getcwd()})
    url = f"http://127.0.0.1:{port}"
    try:
        wait_answering(url + "/healthz", proc, lambda: log.read_text(errors="replace")[-3000:], 90, name="serve")
        # One model: the single-model paths answer for it too.
        assert httpx.get(url + "/v1/schema", timeout=10).json()["model"] == "churn"

        def names() -> list[str]:
            return [m["name"] for m in httpx.get(url + "/v1/models", timeout=10).json()["models"]]
        assert names() == ["churn"]
        write_models(tmp_path / "models", {"churn": {"model": {"features": NUMERIC}},
                                           "price": {"model": {"task": "regression", "features": NUMERIC}}})
        proc.send_signal(signal.SIGHUP)
        wait_until(lambda: names() == ["churn", "price"], 60, 0.2, lambda: log.read_text()[-3000:])
        assert httpx.get(url + "/v1/models/price/schema", timeout=10).json()["task"] == "regression"
        r = httpx.get(url + "/v1/schema", timeout=10)  # two models now: say where to send
        assert r.status_code == 404 and "/v1/models/<name>/schema" in r.json()["error"]
        assert httpx.get(url + "/v1/models/nope/status", timeout=10).status_code == 404
        paths = httpx.get(url + "/openapi.json", timeout=10).json()["paths"]  # every model's paths, once
        assert {"/v1/models", "/v1/models/{name}", "/v1/models/{name}/predictions", "/v1/alerts"} <= set(paths)
        assert "/v1/predictions" not in paths
        # A configuration that does not load changes nothing.
        (tmp_path / "models" / "broken.yaml").write_text("model: [\n")
        proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "the configuration was not applied" in log.read_text(), 30, 0.2)
        assert names() == ["churn", "price"] and proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        assert "model 'price' (regression) added" in log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
