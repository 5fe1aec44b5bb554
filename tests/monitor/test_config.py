from pathlib import Path

import pytest

from monitor.config import load_config
from monitor.errors import ConfigError


def test_defaults_without_a_file(tmp_path):
    cfg = load_config(path=None, environ={}, overrides={"home": str(tmp_path)})
    assert cfg.server.host == "127.0.0.1" and cfg.exporter.host == "127.0.0.1"
    assert cfg.alerts.accuracy_drop == 0.03 and cfg.alerts.auc_drop == 0.05
    assert cfg.store_url.startswith("sqlite:///") and cfg.store_url.endswith("driftloop.db")
    assert cfg.exporter.port not in (9100, 9400, 9835)


def test_file_then_environment_precedence(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text("server:\n  port: 9000\nalerts:\n  accuracy_drop: 0.02\n")
    cfg = load_config(f, environ={"DRIFTLOOP_SERVER__PORT": "9001"})
    assert cfg.server.port == 9001
    assert cfg.alerts.accuracy_drop == 0.02


def test_environment_values_are_typed(tmp_path):
    cfg = load_config(tmp_path / "none.yaml" if False else None, environ={
        "DRIFTLOOP_ALERTS__RETRAIN_ON_DRIFT": "true", "DRIFTLOOP_TRAINING__HIDDEN": "[8, 4]"})
    assert cfg.alerts.retrain_on_drift is True
    assert cfg.training.hidden == [8, 4]


def test_all_problems_reported_together(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text("server:\n  port: 70000\n  prot: 1\nalerts:\n  mode: sideways\n")
    with pytest.raises(ConfigError) as exc:
        load_config(f, environ={"DRIFTLOOP_DRIFT__WINDOW_SIZE": "-5"})
    msg = str(exc.value)
    for needle in ("server.port", "server.prot: unknown key", "alerts.mode", "drift.window_size"):
        assert needle in msg


def test_explicit_missing_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml", environ={})


def test_bad_yaml_is_named(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text("server: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(f, environ={})


def test_model_schema_rejects_duplicates_and_reserved(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text("model:\n  features:\n    - {name: a}\n    - {name: a}\n    - {name: score}\n    - {name: b, type: text}\n")
    with pytest.raises(ConfigError) as exc:
        load_config(f, environ={})
    assert "model.features.3.type" in str(exc.value)


def test_tls_needs_both_files(tmp_path):
    with pytest.raises(ConfigError, match="tls_cert and tls_key"):
        load_config(None, environ={"DRIFTLOOP_EXPORTER__TLS_CERT": "/x.pem"})
