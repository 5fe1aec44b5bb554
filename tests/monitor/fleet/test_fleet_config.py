"""``models:`` and ``models_dir:``: many models in one configuration, each a whole configuration of its own."""
from __future__ import annotations

import pytest
import yaml

from monitor.config import load_config
from monitor.errors import ConfigError


def write(path, data) -> str:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def test_each_model_is_the_shared_sections_plus_its_own_over_the_top_level_defaults(tmp_path):
    f = write(tmp_path / "driftloop.yaml", {
        "home": str(tmp_path / "home"), "server": {"port": 8499},
        "alerts": {"accuracy_drop": 0.04}, "drift": {"interval_seconds": 600},
        "models": {"churn": {"model": {"task": "binary"}},
                   "price": {"model": {"task": "regression"}, "drift": {"interval_seconds": 60},
                             "mlflow": {"registered_model": "car-price"}}}})
    cfg = load_config(f, environ={})
    assert cfg.is_fleet and list(cfg.model_configs()) == ["churn", "price"]
    churn, price = cfg.for_model("churn"), cfg.for_model("price")
    assert (churn.model.name, churn.model.task, price.model.task) == ("churn", "binary", "regression")
    assert churn.alerts.accuracy_drop == price.alerts.accuracy_drop == 0.04      # the top-level default
    assert (churn.drift.interval_seconds, price.drift.interval_seconds) == (600, 60)  # its own wins
    assert churn.server.port == price.server.port == 8499 and churn.store_url == price.store_url  # shared
    assert (churn.registered_model_name, price.registered_model_name) == ("driftloop-churn", "car-price")
    assert churn.experiment_name == "driftloop-churn"
    with pytest.raises(ConfigError, match="2 models .churn, price.: choose one with --model NAME"):
        cfg.for_model(None)
    with pytest.raises(ConfigError, match="no model 'nope'.*churn, price"):
        cfg.for_model("nope")


def test_a_single_model_file_is_a_fleet_of_one_unchanged(tmp_path):
    cfg = load_config(write(tmp_path / "d.yaml", {"model": {"name": "solo"}}), environ={})
    assert not cfg.is_fleet and cfg.model_configs() == {"solo": cfg}
    assert cfg.for_model(None) is cfg and cfg.for_model("solo") is cfg


def test_models_dir_holds_one_file_per_model_and_adds_to_models(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    write(folder / "fraud.yaml", {"model": {"task": "binary"}, "alerts": {"auc_drop": 0.02}})
    write(folder / "eta.yml", {"model": {"task": "regression"}})
    write(folder / "named.yaml", {"model": {"name": "ranker"}})
    (folder / "notes.txt").write_text("ignored")
    cfg = load_config(write(tmp_path / "d.yaml", {"models_dir": "models", "models": {"churn": {}}}), environ={})
    assert list(cfg.model_configs()) == ["churn", "eta", "fraud", "ranker"]
    assert cfg.for_model("fraud").alerts.auc_drop == 0.02 and cfg.for_model("eta").model.task == "regression"


def test_every_problem_names_the_model_and_key(tmp_path):
    f = write(tmp_path / "d.yaml", {
        "mlflow": {"experiment": "shared"},
        "models": {"churn": {"server": {"port": 1}}, "bad name": {},
                   "price": {"model": {"task": "regression", "name": "other"}},
                   "eta": {"alerts": {"accuracy_drop": -1}}, "Eta": {}, "x": {"mlflow": {"tracking_uri": "y"}}}})
    with pytest.raises(ConfigError) as err:
        load_config(f, environ={})
    text = str(err.value)
    for expected in ("mlflow.experiment: one name for every model", "models.churn.server: not a per-model section",
                     "models.bad name: a model's name is", "models.price.model.name: 'other' differs",
                     "models.eta.alerts.accuracy_drop", "models.Eta: its tables would be those of model 'eta'",
                     "models.x.mlflow: tracking_uri shared by the deployment"):
        assert expected in text, (expected, text)
    assert "is also the name" not in text  # the shared experiment is said once, at the top level


def test_two_models_under_one_registered_model_or_experiment_are_refused(tmp_path):
    # One registered model for two would be one `champion` alias: a promotion of one replaced the other.
    f = write(tmp_path / "d.yaml", {"models": {
        "churn": {"mlflow": {"registered_model": "models-of-acme"}},
        "fraud": {"mlflow": {"registered_model": "models-of-acme", "experiment": "driftloop-eta"}},
        "eta": {"model": {"task": "regression"}}, "spare": {"mlflow": {"registered_model": "driftloop-eta"}}}})
    with pytest.raises(ConfigError) as err:
        load_config(f, environ={})
    text = str(err.value)
    for expected in ("models.fraud.mlflow.registered_model: 'models-of-acme' is also the name of model 'churn'",
                     "models.spare.mlflow.registered_model: 'driftloop-eta' is also the name of model 'eta'",
                     "one `champion` alias for both",
                     "models.fraud.mlflow.experiment: 'driftloop-eta' is also the name of model 'eta'"):
        assert expected in text, (expected, text)
    ok = write(tmp_path / "ok.yaml", {"models": {"churn": {"mlflow": {"registered_model": "acme-churn"}},
                                                 "fraud": {}}})
    assert [c.registered_model_name for c in load_config(ok, environ={}).model_configs().values()] == \
        ["acme-churn", "driftloop-fraud"]


def test_models_dir_problems_name_the_file(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "broken.yaml").write_text("model: [unclosed\n")
    write(folder / "churn.yaml", {})
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path / "d.yaml", {"models_dir": "models", "models": {"churn": {}}}), environ={})
    assert "models_dir: broken.yaml: cannot read it as YAML" in str(err.value)
    assert "models_dir: churn.yaml: model 'churn' is already defined in models:" in str(err.value)
    with pytest.raises(ConfigError, match="models_dir: not a folder"):
        load_config(write(tmp_path / "e.yaml", {"models_dir": "nowhere"}), environ={})


def test_flags_win_over_a_models_own_sections_and_the_environment_reaches_one_model(tmp_path):
    f = write(tmp_path / "d.yaml", {"models": {"a": {"drift": {"interval_seconds": 60}}, "b": {}}})
    cfg = load_config(f, environ={"DRIFTLOOP_MODELS__B__ALERTS__ACCURACY_DROP": "0.07"},
                      overrides={"drift": {"interval_seconds": 5}})
    assert cfg.for_model("a").drift.interval_seconds == cfg.for_model("b").drift.interval_seconds == 5
    assert cfg.for_model("b").alerts.accuracy_drop == 0.07 and cfg.for_model("a").alerts.accuracy_drop == 0.03


def test_a_models_rules_are_checked_against_its_own_task(tmp_path):
    f = write(tmp_path / "d.yaml", {"models": {"price": {"model": {"task": "regression"},
                                                         "alerts": {"rules": [{"metric": "roc_auc", "drop": 0.05}]}}}})
    with pytest.raises(ConfigError, match="models.price: .*roc_auc do not apply to a regression model"):
        load_config(f, environ={})
