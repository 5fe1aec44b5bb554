"""The fleet's paths as a hostile or careless client meets them: a trailing slash is no redirect (it
was a 307 built from the client's Host header, onto the path with ``/v1/models/<name>`` taken off),
an encoded slash in the model segment routes nowhere, and with a token set the hosted names are told
only to callers that carry it."""
from __future__ import annotations

import asyncio

import httpx
import yaml

from monitor.config import load_config

TOKEN = "s3cret-token-for-tests"
NUMERIC = [{"name": "x", "type": "numeric"}]


async def _send(app, *requests: tuple[str, str, dict]) -> list[httpx.Response]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dl") as http:
        return [await http.request(method, path, json=[], headers=headers) for method, path, headers in requests]


def test_fleet_paths_refuse_redirects_encoded_slashes_and_tell_names_only_with_the_token(tmp_path):
    from monitor.daemon.runtime.fleet import Fleet
    from monitor.daemon.runtime.fleet_http import FleetApp

    config = tmp_path / "driftloop.yaml"
    config.write_text(yaml.safe_dump({
        "home": str(tmp_path / "home"), "server": {"gpu_metrics": False, "token": TOKEN, "protect_reads": True},
        "models": {"churn": {"model": {"features": NUMERIC}}, "species": {"model": {"features": NUMERIC}}}}))
    fleet = Fleet(load_config(config, environ={}))
    fleet.start(scheduler=False)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        slash, status_slash, encoded, stored, anon_unknown, unknown, anon_plain, plain = asyncio.run(_send(
            FleetApp(fleet),
            ("POST", "/v1/models/species/labels/", {**auth, "Host": "evil.example"}),
            ("GET", "/v1/models/churn/status/", auth),
            ("POST", "/v1/models/churn%2Fpredictions", auth),
            ("POST", "/v1/models/churn/predictions", auth),
            ("GET", "/v1/models/nope/status", {}),
            ("GET", "/v1/models/nope/status", auth),
            ("POST", "/v1/predictions", {}),
            ("POST", "/v1/predictions", auth)))
        assert slash.status_code == 404 and "location" not in slash.headers, (slash.status_code, slash.headers)
        assert status_slash.status_code == 404 and "location" not in status_slash.headers
        assert encoded.status_code == 404 and "%2F" in encoded.json()["error"], encoded.text
        assert stored.status_code == 200  # the same request, its path not encoded
        # Without the token: pointed at GET /v1/models (itself behind the token), no names.
        for answer in (anon_unknown, anon_plain):
            assert answer.status_code == 404 and "churn" not in answer.text and "species" not in answer.text
            assert "GET /v1/models" in answer.text
        # With it: the names that help.
        assert unknown.status_code == 404 and "churn, species" in unknown.json()["error"]
        assert plain.status_code == 404 and "churn, species" in plain.json()["error"]
    finally:
        fleet.stop()


def test_readiness_with_every_model_failed_is_503_not_a_404(tmp_path):
    from monitor.daemon.runtime.fleet import Fleet
    from monitor.daemon.runtime.fleet_http import FleetApp

    config = tmp_path / "driftloop.yaml"
    models = tmp_path / "models"
    models.mkdir()
    config.write_text(yaml.safe_dump({"home": str(tmp_path / "home"), "models_dir": "models",
                                      "server": {"gpu_metrics": False}}))
    for name in ("a", "b"):
        (models / f"{name}.yaml").write_text(yaml.safe_dump({"model": {"features": NUMERIC}}))
    fleet = Fleet(load_config(config, environ={}))
    fleet.start(scheduler=False)
    try:
        for name in ("a", "b"):  # the stored feature becomes text: neither model can run on its tables
            (models / f"{name}.yaml").write_text(yaml.safe_dump({"model": {"features": [
                {"name": "x", "type": "categorical"}]}}))
        fleet.reload(load_config(config, environ={}))
        assert fleet.daemons == {} and sorted(fleet.failed) == ["a", "b"]

        async def probe() -> list[httpx.Response]:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=FleetApp(fleet)),
                                         base_url="http://dl") as http:
                return [await http.get("/readyz"), await http.get("/healthz"), await http.get("/livez")]
        ready, healthy, live = asyncio.run(probe())
        assert ready.status_code == 503 and "failed: a, b" in ready.json()["error"], ready.text  # was 404
        assert healthy.status_code == 503
        assert live.status_code == 200, live.text  # the process itself lives
    finally:
        fleet.stop()


def _alert(model: str) -> dict:
    return {"version": "4", "status": "firing", "receiver": "driftloop", "groupKey": "{}:{}",
            "alerts": [{"status": "firing", "labels": {"alertname": "ModelAccuracyDrop", "component": "model",
                                                       "model": model},
                        "startsAt": "2026-11-30T10:00:00Z", "fingerprint": f"fp-{model}"}]}


def test_an_alert_a_model_could_not_take_is_a_503_whatever_the_other_models_did(tmp_path, monkeypatch):
    """Two daemons on one store: the model's leader had MLflow down and answered 200 (its other models,
    which the alert did not concern, "succeeded"), so Alertmanager never re-sent and the alert was lost.
    Models an alert does not concern are not asked (nor is their MLflow: 29 s with three of them down)."""
    from monitor.daemon.runtime.fleet import Fleet
    from monitor.daemon.runtime.fleet_http import FleetApp
    from monitor.errors import RegistryError

    config = tmp_path / "driftloop.yaml"
    config.write_text(yaml.safe_dump({
        "home": str(tmp_path / "home"), "server": {"gpu_metrics": False},
        "models": {"churn": {"model": {"features": NUMERIC}}, "species": {"model": {"features": NUMERIC}}}}))
    fleet = Fleet(load_config(config, environ={}))
    fleet.start(scheduler=False)
    asked = []

    def down() -> None:
        asked.append("species")
        raise RegistryError("MLflow at sqlite:///x is locked")
    monkeypatch.setattr(fleet.daemons["species"], "check_registry", down)

    app = FleetApp(fleet)

    async def send(payload: dict) -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dl") as h:
            return await h.post("/v1/alerts", json=payload)
    try:
        lost = asyncio.run(send(_alert("species")))
        assert lost.status_code == 503 and lost.headers["retry-after"], lost.text  # was 200: never re-sent
        assert "RegistryError" in lost.json()["models"]["species"]["error"]
        assert lost.json()["models"]["churn"]["kind"] == "nothing"
        taken = asyncio.run(send(_alert("churn")))
        assert taken.status_code == 200, taken.text
        assert taken.json()["models"]["churn"]["kind"] == "opened"
        assert taken.json()["models"]["species"]["kind"] == "nothing" and asked == ["species"]  # not asked again
    finally:
        fleet.stop()
