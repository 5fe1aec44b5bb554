
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


def test_log_level_in_any_case_as_the_flag_takes_it(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text("logging:\n  level: info\n")  # was refused: "input should be 'DEBUG', 'INFO', ..."
    assert load_config(f, environ={}).logging.level == "INFO"
    assert load_config(None, environ={"DRIFTLOOP_LOGGING__LEVEL": " warning"}).logging.level == "WARNING"
    with pytest.raises(ConfigError, match="logging.level"):
        load_config(None, environ={"DRIFTLOOP_LOGGING__LEVEL": "loud"})


def test_a_store_url_that_is_no_database_or_lives_in_memory_is_refused():
    with pytest.raises(ConfigError, match="store.url: .*expected a database URL"):
        load_config(None, environ={}, overrides={"store": {"url": "::::"}})  # was a traceback in `status`
    for memory in ("sqlite://", "sqlite:///:memory:"):  # was accepted: acknowledged, then gone at exit
        with pytest.raises(ConfigError, match="in-memory SQLite store loses every acknowledged row"):
            load_config(None, environ={}, overrides={"store": {"url": memory}})
    assert load_config(None, environ={}, overrides={"store": {"url": "sqlite:////tmp/x.db"}}).store.url


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


def test_unreadable_config_is_a_one_line_config_error(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text("server:\n  port: 1\n   host: x\n")
    with pytest.raises(ConfigError, match=r"not valid YAML at line 3, column 8: mapping values") as exc:
        load_config(f, environ={})
    assert "\n" not in str(exc.value)
    f.write_bytes(b"home: \"\xff\"\n")
    with pytest.raises(ConfigError, match="cannot read the config file"):
        load_config(f, environ={})
    with pytest.raises(ConfigError, match="cannot read the config file"):
        load_config(None, environ={"DRIFTLOOP_CONFIG": str(tmp_path)})


def test_model_schema_rejects_duplicates_and_reserved(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text("model:\n  features:\n    - {name: a}\n    - {name: a}\n    - {name: score}\n    - {name: b, type: "
                 "text}\n")
    with pytest.raises(ConfigError) as exc:
        load_config(f, environ={})
    assert "model.features[3].type" in str(exc.value)


def test_tls_needs_both_files(tmp_path):
    with pytest.raises(ConfigError, match="tls_cert and tls_key"):
        load_config(None, environ={"DRIFTLOOP_EXPORTER__TLS_CERT": "/x.pem"})


def test_environment_names_and_empty_values():
    """The rules that pydantic-settings' env source would break (see monitor.config._env_overrides)."""
    with pytest.raises(ConfigError) as exc:
        load_config(path=None, environ={"DRIFTLOOP_SERVR__PORT": "5", "DRIFTLOOP_SERVER__PROT": "5"})
    assert "servr: unknown key" in str(exc.value) and "server.prot: unknown key" in str(exc.value)
    cfg = load_config(path=None, environ={
        "DRIFTLOOP_SERVER__TOKEN": "", "DRIFTLOOP_MODEL__SEGMENTS": "[region, hour_of_day]",
        "DRIFTLOOP_MODEL__FEATURES": "[{name: x0}, {name: region, type: categorical}]"})
    assert cfg.server.token is None and cfg.model.segments == ["region", "hour_of_day"]
    with pytest.raises(ConfigError, match="empty path segment"):
        load_config(path=None, environ={"DRIFTLOOP_SERVER____PORT": "5"})


def test_environment_text_keys_are_taken_verbatim():
    # YAML would read a token '#s3cret' as null (authentication silently off), '0123' as 83,
    # '::' as a mapping and 'off' as false; text keys keep the variable as written.
    cfg = load_config(path=None, environ={
        "DRIFTLOOP_SERVER__TOKEN": "#s3cret-token", "DRIFTLOOP_SERVER__HOST": "::", "DRIFTLOOP_MODEL__NAME": "0123",
        "DRIFTLOOP_TRAINING__AMP": "off", "DRIFTLOOP_EXPORTER__HOST": "0.0.0.0",
        "DRIFTLOOP_DRIFT__NUM_METHOD": "psi", "DRIFTLOOP_SERVER__PORT": "8471"})
    assert cfg.server.token == "#s3cret-token" and cfg.server.host == "::" and cfg.model.name == "0123"
    assert cfg.training.amp == "off" and cfg.drift.num_method == "psi" and cfg.server.port == 8471
    assert load_config(path=None,
                       environ={"DRIFTLOOP_SERVER__TOKEN": "abc #def-0123456"}).server.token == "abc #def-0123456"
    assert load_config(path=None, environ={"DRIFTLOOP_DRIFT__NUM_METHOD": "null"}).drift.num_method is None


def test_unquoted_amp_off_in_the_file(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text("training:\n  amp: off\n")
    assert load_config(f, environ={}).training.amp == "off"


def test_token_from_a_file(tmp_path):
    secret = tmp_path / "token"
    secret.write_text("s3cret-token-0\n")
    assert load_config(path=None,
                       environ={"DRIFTLOOP_SERVER__TOKEN_FILE": str(secret)}).server.token == "s3cret-token-0"
    with pytest.raises(ConfigError, match="token_file .* cannot read: No such file") as missing:
        load_config(path=None, environ={"DRIFTLOOP_SERVER__TOKEN_FILE": str(tmp_path / "nope")})
    with pytest.raises(ConfigError, match="server.token or server.token_file, not both") as both:
        load_config(path=None, environ={"DRIFTLOOP_SERVER__TOKEN_FILE": str(secret), "DRIFTLOOP_SERVER__TOKEN": "t0k"})
    assert "t0k" not in str(both.value) and "s3cret" not in str(missing.value)


def test_id_and_ignore_columns_are_not_features():
    with pytest.raises(ConfigError, match="clash with reserved columns: customer_id"):
        load_config(path=None, environ={},
                    overrides={"model": {"id": "customer_id", "features": [{"name": "customer_id"}]}})
    cfg = load_config(path=None, environ={}, overrides={"model": {"ignore": ["notes"]}})
    assert not cfg.model.features_configured and cfg.model.ignore == ["notes"]


def test_alert_rules_are_validated_naming_the_key(tmp_path):
    from monitor.config import load_config as load
    f = tmp_path / "driftloop.yaml"
    f.write_text("alerts:\n  rules:\n    - {metric: recall, drop: 0.05, segment: true}\n    - {metric: rcall, drop: "
                 "0.1}\n")
    with pytest.raises(ConfigError) as exc:
        load(f, environ={})
    assert "alerts.rules[1].metric" in str(exc.value)
    assert "'accuracy', 'roc_auc', 'precision', 'recall', 'f1', 'positive_rate'" in str(exc.value)
    assert "'mape', 'r2' or 'residual_shift' (got 'rcall')" in str(exc.value)
    with pytest.raises(ConfigError, match=r"alerts.rules\[0\]: .*segment: true needs .*accuracy, recall.*not f1"):
        load(None, environ={}, overrides={"alerts": {"rules": [{"metric": "f1", "drop": 0.05, "segment": True}]}})
    with pytest.raises(ConfigError, match=r"alerts.rules: .*more than one rule for recall"):
        load(None, environ={}, overrides={"alerts": {"rules": [{"metric": "recall", "drop": 0.05},
                                                               {"metric": "recall", "drop": 0.1}]}})
    with pytest.raises(ConfigError, match=r"alerts.rules\[0\].drop: Input should be greater than 0"):
        load(None, environ={}, overrides={"alerts": {"rules": [{"metric": "f1", "drop": 0}]}})
    cfg = load(None, environ={"DRIFTLOOP_ALERTS__RULES": "[{metric: recall, drop: 0.05}]"})
    assert [(r.metric, r.drop, r.segment) for r in cfg.alerts.rules] == [("recall", 0.05, False)]


def test_the_health_port_is_off_by_default_and_must_differ_from_the_api_port():
    cfg = load_config(path=None, environ={}, overrides={})
    assert cfg.server.health_port is None and cfg.server.health_stall_seconds == 30
    assert load_config(path=None, environ={"DRIFTLOOP_SERVER__HEALTH_PORT": "8471"}).server.health_port == 8471
    with pytest.raises(ConfigError, match="health_port"):
        load_config(path=None, environ={}, overrides={"server": {"port": 9000, "health_port": 9000}})
