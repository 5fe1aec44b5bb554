"""Process lifecycle and configuration faults: an idle daemon stops within 2 s of SIGTERM and a
restart right after binds the same port; unusable tokens are one clear config error; MLflow's
registry read-only or gone is named as such, never silently recreated empty."""
from __future__ import annotations

import shutil
import signal
import subprocess
import time

import httpx
import pytest

from monitor.errors import RegistryError
from tests.faults.conftest import AUTH, remount, running_daemon, tiny_filesystem
from tests.monitor.daemon.test_serve import DRIFTLOOP, served  # noqa: F401  (fixture)
from tests.support.services import free_port


def test_idle_daemon_stops_within_two_seconds_and_restarts_on_the_same_port(make_config, served):
    cfg = make_config(with_champion=False)
    first = served(cfg).start("--check-interval", "3600")
    # A client holding a keep-alive connection open must not delay the shutdown.
    client = httpx.Client(base_url=first.url, timeout=10)
    assert client.get("/v1/status").status_code == 200
    started = time.monotonic()
    first.proc.send_signal(signal.SIGTERM)
    assert first.proc.wait(30) == 0, first.log()
    took = time.monotonic() - started
    client.close()
    print(f"\nidle shutdown took {took:.2f} s")
    assert took <= 2.0, f"shutdown took {took:.1f} s:\n{first.log()}"
    second = served(cfg)
    second.port, second.url = first.port, first.url  # at once, on the same port
    second.start("--check-interval", "3600")
    assert httpx.get(second.url + "/livez", timeout=10).status_code == 200


@pytest.mark.parametrize("token, expected",
                         [(" ", "blank"), ("short", "at least 12"), (" padded-token-0123 ", "whitespace")])
def test_unusable_tokens_are_one_clear_config_error(tmp_path, token, expected):
    done = subprocess.run([*DRIFTLOOP, "serve", "--port", "1"], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "DRIFTLOOP_SERVER__TOKEN": token,
                                             "DRIFTLOOP_HOME": str(tmp_path / "home")})
    assert done.returncode != 0
    assert "server.token" in done.stderr and expected in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) <= 2
    if token.strip():
        assert token.strip() not in done.stderr  # a secret is never echoed


def test_missing_mlflow_registry_under_a_served_champion_is_refused(make_config, tmp_path):
    cfg = make_config({"server": {"token": "fault-token-0123456789", "port": free_port()}})
    with running_daemon(cfg) as (daemon, url):
        assert daemon.champion.version() == "1"  # served from the registry
        (cfg.home / "mlflow.db").unlink()
        r = httpx.post(f"{url}/v1/retrain", headers=AUTH, timeout=30)
        assert r.status_code == 503 and "is missing" in r.json()["error"], r.text
        assert "restore the file" in r.json()["error"]
        ready = httpx.get(f"{url}/readyz", headers=AUTH, timeout=30).json()
        assert ready["checks"]["mlflow"] == "unreachable" and "missing" in ready["reasons"]["mlflow"]
        with pytest.raises(RegistryError, match="missing"):
            daemon.champion.version()
        assert not (cfg.home / "mlflow.db").exists()  # not recreated empty behind our back


def test_read_only_mlflow_registry_is_named(make_config, tmp_path, baseline_home):
    with tiny_filesystem(tmp_path / "registry", size="64m") as folder:
        shutil.copy(baseline_home / "mlflow.db", folder / "mlflow.db")
        cfg = make_config({"mlflow": {"tracking_uri": f"sqlite:///{folder / 'mlflow.db'}"},
                           "server": {"token": "fault-token-0123456789", "port": free_port()}}, with_champion=False)
        remount(folder, readonly=True)
        from trainer import registry as reg
        with pytest.raises(RegistryError, match="read-only filesystem"):
            reg.check_reachable(cfg)
        with running_daemon(cfg) as (_, url):
            r = httpx.post(f"{url}/v1/retrain", headers=AUTH, timeout=30)
            assert r.status_code == 503 and "read-only" in r.json()["error"], r.text
