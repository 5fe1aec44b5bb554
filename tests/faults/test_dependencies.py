"""Every endpoint with a dependency failing under it: 503 + Retry-After in the common error shape
(or a normal answer where the endpoint does not need it), never another 5xx or a traceback."""
from __future__ import annotations

import signal
import sqlite3

import httpx

from tests.faults.conftest import AUTH, FIRING, assert_no_5xx_but_503, fault_config, running_daemon
from tests.support.postgres import start_postgres
from tests.support.services import free_port


def prediction(i: int) -> dict:
    features = {f"x{k}": 0.1 * k for k in range(8)} | {"region": "eu", "device": "ios"}
    return {"id": f"p-{i}", "features": features, "score": 0.7}


def hit_every_endpoint(url: str) -> dict[str, httpx.Response]:
    with httpx.Client(base_url=url, timeout=60) as c:
        return {
            "predictions": c.post("/v1/predictions", json=[prediction(1), prediction(2)], headers=AUTH),
            "labels": c.post("/v1/labels", json=[{"id": "p-1", "label": 1}], headers=AUTH),
            "alerts": c.post("/v1/alerts", json=FIRING, headers=AUTH),
            "retrain": c.post("/v1/retrain", json={"reason": "fault test"}, headers=AUTH),
            "status": c.get("/v1/status"),
            "readyz": c.get("/readyz"),
            "healthz": c.get("/healthz"),
            "livez": c.get("/livez"),
            "metrics": c.get("/metrics"),
            "openapi": c.get("/openapi.json"),
        }


def check_contract(answers: dict[str, httpx.Response]) -> None:
    for name, r in answers.items():
        assert_no_5xx_but_503(r, name)
    assert answers["livez"].status_code == 200
    assert answers["metrics"].status_code == 200 and answers["openapi"].status_code == 200


def test_sqlite_store_locked_beyond_its_busy_timeout(tmp_path):
    cfg = fault_config(tmp_path / "home", store={"busy_timeout_seconds": 0.5})
    with running_daemon(cfg) as (daemon, url):
        assert httpx.post(f"{url}/v1/predictions", json=[prediction(0)], headers=AUTH).status_code == 200
        holder = sqlite3.connect(cfg.home / "driftloop.db", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        try:
            answers = hit_every_endpoint(url)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        check_contract(answers)
        for name in ("predictions", "labels", "alerts", "retrain", "readyz", "healthz"):
            assert answers[name].status_code == 503, (name, answers[name].text)
        assert "locked" in answers["retrain"].json()["error"]
        assert answers["readyz"].json()["checks"]["store"] in ("locked", "no_answer")  # kinds, no path
        assert answers["status"].status_code == 200  # reads go on under WAL
        assert 'driftloop_store_writable{model="demo"} 0.0' in answers["metrics"].text
        # The lock released, everything answers again, and nothing half-written is left behind.
        again = hit_every_endpoint(url)
        assert again["readyz"].status_code == 200 and again["predictions"].json() == {"stored": 2, "duplicates": 0}
        assert again["alerts"].status_code == 200 and again["retrain"].status_code in (202, 409)
        assert daemon.store.row_counts() == {"predictions": 3, "labels": 1}


def test_postgresql_stopped_mid_test(tmp_path):
    server = start_postgres()
    try:
        cfg = fault_config(tmp_path / "home", store={"url": server.create_database()})
        with running_daemon(cfg) as (daemon, url):
            before = hit_every_endpoint(url)
            assert before["predictions"].status_code == 200 and before["readyz"].status_code == 200
            server.proc.send_signal(signal.SIGINT)  # PostgreSQL's fast shutdown: clients are cut off
            server.proc.wait(30)
            answers = hit_every_endpoint(url)
            check_contract(answers)
            for name in ("predictions", "labels", "alerts", "retrain", "status", "readyz", "healthz"):
                assert answers[name].status_code == 503, (name, answers[name].text)
            assert "store" in answers["status"].json()["error"]
            assert 'driftloop_store_writable{model="demo"} 0.0' in answers["metrics"].text
            assert 'driftloop_store_up{model="demo"} 0.0' in answers["metrics"].text
            assert "driftloop_daemon_store_up 0.0" in answers["metrics"].text
    finally:
        server.stop()


def test_mlflow_unreachable(tmp_path):
    cfg = fault_config(tmp_path / "home", mlflow={"tracking_uri": f"http://127.0.0.1:{free_port()}",
                                                  "timeout_seconds": 1})
    with running_daemon(cfg) as (daemon, url):
        answers = hit_every_endpoint(url)
        check_contract(answers)
        assert answers["predictions"].status_code == 200  # ingestion does not need MLflow
        for name in ("retrain", "alerts", "readyz"):
            assert answers[name].status_code == 503, (name, answers[name].text)
        assert "MLflow tracking server" in answers["retrain"].json()["error"]
        assert answers["readyz"].json()["checks"]["mlflow"] == "unreachable"
        assert answers["readyz"].json()["checks"]["store"] == "ok"
        status = answers["status"].json()
        # Without the token the error is hidden (it names the tracking URI); with it, it is whole.
        assert answers["status"].status_code == 200 and status["champion"]["error"] == "hidden"
        assert cfg.tracking_uri not in answers["status"].text
        owner = httpx.get(f"{url}/v1/status", headers=AUTH, timeout=30).json()
        assert "unreachable" in owner["champion"]["error"]
        assert daemon.controller.incidents.recent() == []  # nothing acted on while MLflow is away
