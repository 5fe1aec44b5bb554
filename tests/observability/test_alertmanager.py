"""alertmanager.yml: valid, every alert routed where it belongs, the daemon's token kept out of it."""
from __future__ import annotations

import pytest
import yaml

from monitor.config import ServerConfig
from tests.observability.conftest import run
from tests.observability.promql import REPO, load_rules

CONFIG = REPO / "alertmanager.yml"
TOKEN_PATH = "/run/secrets/driftloop_token"  # docker-compose.yml mounts the secret here
ALERTS = [r for r in load_rules() if "alert" in r]


@pytest.fixture
def config_copy(tmp_path):
    """The config with the token file moved to a temporary file (amtool may check it exists)."""
    token = tmp_path / "driftloop-token"
    token.write_text("test-token\n")
    copy = tmp_path / "alertmanager.yml"
    text = CONFIG.read_text()
    assert text.count(TOKEN_PATH) == 1
    copy.write_text(text.replace(TOKEN_PATH, str(token)))
    return copy


def test_amtool_check_config(amtool, config_copy):
    proc = run([amtool, "check-config", str(config_copy)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_amtool_rejects_a_route_to_a_missing_receiver(amtool, config_copy):
    config_copy.write_text(config_copy.read_text().replace("receiver: ml-team", "receiver: nobody"))
    assert run([amtool, "check-config", str(config_copy)]).returncode != 0


def _expected_receivers(labels: dict) -> str:
    team = {"ml": "ml-team", "infra": "infra-team"}[labels["team"]]
    return f"driftloop,{team}" if labels["component"] == "model" else team


@pytest.mark.parametrize("alert", ALERTS, ids=[a["alert"] for a in ALERTS])
def test_every_alert_is_routed(amtool, config_copy, alert):
    labels = {"alertname": alert["alert"], "model": "demo", "job": "driftloop", "instance": "d:8470",
              **alert["labels"]}
    proc = run([amtool, "config", "routes", "test", f"--config.file={config_copy}",
                *(f"{k}={v}" for k, v in labels.items())])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == _expected_receivers(alert["labels"])


def test_unlabelled_alerts_reach_the_default_receiver(amtool, config_copy):
    proc = run([amtool, "config", "routes", "test", f"--config.file={config_copy}", "alertname=Other"])
    assert proc.stdout.strip() == "default"


def test_webhook_targets_the_daemon_with_a_token_file():
    cfg = yaml.safe_load(CONFIG.read_text())
    (receiver,) = [r for r in cfg["receivers"] if r["name"] == "driftloop"]
    (hook,) = receiver["webhook_configs"]
    assert hook["url"] == f"http://driftloop:{ServerConfig().port}/v1/alerts"
    assert hook["send_resolved"] is True
    auth = hook["http_config"]["authorization"]
    assert auth == {"type": "Bearer", "credentials_file": TOKEN_PATH}
    assert "credentials:" not in CONFIG.read_text()  # never an inline secret
