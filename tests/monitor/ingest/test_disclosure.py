"""Nothing about the host in unauthenticated answers (issue 35, item 2): /readyz and 503 bodies
give a caller without the bearer token kinds only, never the store's path, its mount point or an
exception text; the token's holders (and the log) get the reasons. ``server.protect_reads`` puts
every read but the probes behind the token."""
from __future__ import annotations

import os
import sqlite3

import httpx
import pytest
import sqlalchemy as sa

from monitor.config import load_config
from monitor.errors import ConfigError, Outage, StoreError
from monitor.ingest import create_app
from monitor.store import PredictionStore
from tests.monitor.ingest.conftest import TOKEN, make_config, serve

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def readyz(url: str, home, headers: dict[str, str] | None = None) -> dict:
    r = httpx.get(f"{url}/readyz", headers=headers, timeout=10)
    assert r.status_code == 503 and r.headers["retry-after"], r.text
    if headers is None:
        assert str(home) not in r.text and "reasons" not in r.json(), r.text  # no path, no mount point
    return r.json()


def test_a_full_store_tells_its_kind_to_anyone_and_its_path_to_the_token(tmp_path):
    cfg = make_config(tmp_path)
    fs = os.statvfs(tmp_path)
    cfg = cfg.model_copy(update={"store": cfg.store.model_copy(
        update={"min_free_bytes": fs.f_bavail * fs.f_frsize + 2**40})})
    with PredictionStore.from_config(cfg) as store, serve(create_app(cfg, store)) as url:
        anyone = readyz(url, tmp_path)
        assert anyone["checks"] == {"store": Outage.DISK_FULL.value}
        owner = readyz(url, tmp_path, AUTH)
        assert owner["checks"] == {"store": Outage.DISK_FULL.value}
        assert str(tmp_path) in owner["reasons"]["store"] and str(tmp_path) in owner["error"]
        # A write needs the token anyway: its 503 names the key to change.
        r = httpx.post(f"{url}/v1/predictions", json=[], headers=AUTH, timeout=10)
        assert r.status_code == 503 and r.json()["kind"] == Outage.DISK_FULL.value


def test_a_locked_store_is_locked_for_anyone_without_the_file_name(tmp_path):
    cfg = make_config(tmp_path)
    cfg = cfg.model_copy(update={"store": cfg.store.model_copy(update={"busy_timeout_seconds": 0.1})})
    with PredictionStore.from_config(cfg) as store, serve(create_app(cfg, store)) as url:
        holder = sqlite3.connect(store.engine.url.database, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            anyone = readyz(url, tmp_path)
            assert anyone["checks"]["store"] in (Outage.LOCKED.value, Outage.NO_ANSWER.value)
            owner = readyz(url, tmp_path, AUTH)
            assert owner["checks"]["store"] in (Outage.LOCKED.value, Outage.NO_ANSWER.value)
            assert "store" in owner["reasons"]
        finally:
            holder.execute("ROLLBACK")
            holder.close()


def test_a_read_only_filesystem_hides_its_mount_point(tmp_path, monkeypatch):
    cfg = make_config(tmp_path)
    real = os.statvfs

    def read_only(path):
        fs = real(path)
        return os.statvfs_result((*fs[:8], fs.f_flag | os.ST_RDONLY, fs.f_namemax))

    with PredictionStore.from_config(cfg) as store, serve(create_app(cfg, store)) as url:
        monkeypatch.setattr(os, "statvfs", read_only)
        anyone = readyz(url, tmp_path)
        assert anyone["checks"] == {"store": Outage.READ_ONLY.value}
        owner = readyz(url, tmp_path, AUTH)
        assert str(tmp_path) in owner["reasons"]["store"]


def test_without_a_token_configured_every_caller_is_trusted(tmp_path):
    cfg = load_config(environ={}, overrides={"home": str(tmp_path), "model": {"name": "m", "features": [
        {"name": "x0"}]}, "store": {"min_free_bytes": 2**62}})
    with PredictionStore.from_config(cfg) as store, serve(create_app(cfg, store)) as url:
        r = httpx.get(f"{url}/readyz", timeout=10)
        assert r.status_code == 503 and str(tmp_path) in r.json()["reasons"]["store"]


def test_a_503_from_a_dependency_names_the_host_only_to_the_token(tmp_path):
    cfg = make_config(tmp_path)
    with PredictionStore.from_config(cfg) as store:
        app = create_app(cfg, store)
        secret = str(tmp_path / "store.db")

        @app.get("/store-down")
        def store_down() -> None:
            raise StoreError(f"store sqlite:///{secret}: cannot take writes", kind=Outage.READ_ONLY)

        @app.get("/sql-locked")
        def sql_locked() -> None:
            raise sa.exc.OperationalError("INSERT", {}, sqlite3.OperationalError(f"database {secret} is locked"))

        with serve(app) as url:
            for path, kind in (("/store-down", Outage.READ_ONLY), ("/sql-locked", Outage.LOCKED)):
                r = httpx.get(f"{url}{path}", timeout=10)
                assert r.status_code == 503 and r.headers["retry-after"]
                assert r.json()["kind"] == kind.value and secret not in r.text, r.text
                r = httpx.get(f"{url}{path}", headers=AUTH, timeout=10)
                assert r.json()["kind"] == kind.value and secret in r.json()["error"]


@pytest.mark.parametrize("protect", [False, True])
def test_protect_reads_puts_every_read_but_the_probes_behind_the_token(tmp_path, protect):
    cfg = make_config(tmp_path, protect_reads=protect)
    with PredictionStore.from_config(cfg) as store, serve(create_app(cfg, store)) as url, \
            httpx.Client(base_url=url, timeout=10) as c:
        for path in ("/v1/schema", "/metrics", "/openapi.json", "/docs"):
            r = c.get(path)
            assert r.status_code == (401 if protect else 200), (path, r.text)
            if protect:
                assert r.headers["www-authenticate"].startswith("Bearer")
            assert c.get(path, headers=AUTH).status_code == 200
        for path in ("/livez", "/readyz", "/healthz"):
            assert c.get(path).status_code == 200, path


def test_protect_reads_without_a_token_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="protect_reads"):
        load_config(environ={}, overrides={"home": str(tmp_path), "model": {"name": "m", "features": [
            {"name": "x0"}]}, "server": {"protect_reads": True}})
