"""``driftloop init --data FILE --model NAME`` adds a model to an existing driftloop.yaml: under its
``models:``, into its ``models_dir:``, or, in a file of one model, after moving that model's own
sections under ``models:`` by its name, the shared ones left at the top. The file's comments are
kept, and the result loads as ``train`` and ``serve`` will load it."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from monitor.cli import main
from monitor.config import ModelConfig, load_config
from tests.trainer.task_data import regression_rows
from trainer.synthetic import make_dataset

SHARED = """\
home: {home}   # where the store and the registry live
server:
  port: 8471   # one daemon for every model
mlflow:
  # the tracking server, shared
  tracking_uri: sqlite:///{home}/mlflow.db
  # the name our services load
  registered_model: churn-prod
training:
  epochs: 12   # churn's own
"""


@pytest.fixture(autouse=True)
def no_driftloop_environment(monkeypatch, tmp_path):
    for name in [k for k in __import__("os").environ if k.startswith("DRIFTLOOP_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def data(tmp_path) -> dict[str, Path]:
    files = {"churn": tmp_path / "churn.csv", "price": tmp_path / "price.csv", "fraud": tmp_path / "fraud.csv"}
    make_dataset(300, seed=1).to_csv(files["churn"], index=False)
    regression_rows(300, seed=2).to_csv(files["price"], index=False)
    make_dataset(300, seed=3).rename(columns={"label": "is_fraud"}).to_csv(files["fraud"], index=False)
    return files


def init(*args: str) -> int:
    return main(["init", "--target", "label", *args])


def one_model_file(tmp_path: Path, data: dict[str, Path]) -> Path:
    """What a user has after `driftloop init` for churn and a few settings of their own."""
    path = tmp_path / "driftloop.yaml"
    assert init("--data", str(data["churn"])) == 0
    path.write_text(path.read_text() + SHARED.format(home=tmp_path / "home"))
    return path


def test_a_second_model_turns_a_one_model_file_into_models(tmp_path, data, capsys):
    path = one_model_file(tmp_path, data)
    before = load_config(path, environ={})
    capsys.readouterr()

    assert init("--data", str(data["price"]), "--model", "price") == 0
    out = capsys.readouterr().out
    assert "'price'" in out and "driftloop train --model price" in out

    cfg = load_config(path, environ={})
    assert cfg.is_fleet and list(cfg.model_configs()) == ["churn", "price"]
    churn, price = cfg.for_model("churn"), cfg.for_model("price")
    # churn is the model it was: its sections, its registry name, its tables
    assert churn.model.model_dump() == before.model.model_dump()
    assert (churn.registered_model_name, churn.training.epochs) == ("churn-prod", 12)
    assert (churn.store_url, churn.tracking_uri) == (before.store_url, before.tracking_uri)
    # price is what init inferred, with its own registry name and the defaults churn's tuning is not
    assert price.model.task == "regression" and price.model.feature_names == before.model.feature_names
    assert price.registered_model_name == "driftloop-price" and price.training.epochs != 12
    # the shared sections stayed at the top, every comment with them
    data_ = yaml.safe_load(path.read_text())
    assert set(data_) == {"home", "server", "mlflow", "models"} and data_["server"] == {"port": 8471}
    assert data_["mlflow"] == {"tracking_uri": f"sqlite:///{tmp_path / 'home'}/mlflow.db"}
    text = path.read_text()
    for comment in ("# where the store and the registry live", "# one daemon for every model",
                    "# the tracking server, shared", "# the name our services load", "# churn's own",
                    "# Added by `driftloop init --model price`", "# the true value, a number"):
        assert comment in text, comment
    assert "#   driftloop train --model churn --data" in text  # the moved model's own hint follows it


def test_models_gets_another_entry_a_taken_name_is_refused_and_force_replaces_it(tmp_path, data, capsys):
    path = one_model_file(tmp_path, data)
    assert init("--data", str(data["price"]), "--model", "price") == 0
    assert main(["init", "--data", str(data["fraud"]), "--target", "is_fraud", "--model", "fraud"]) == 0
    cfg = load_config(path, environ={})
    assert list(cfg.model_configs()) == ["churn", "price", "fraud"]
    assert cfg.for_model("fraud").model.target == "is_fraud"
    capsys.readouterr()

    text = path.read_text()
    assert init("--data", str(data["churn"]), "--model", "price") == 2
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and "'price'" in err and "--force" in err
    assert path.read_text() == text  # untouched

    assert init("--data", str(data["churn"]), "--model", "price", "--force") == 0
    cfg = load_config(path, environ={})
    assert list(cfg.model_configs()) == ["churn", "price", "fraud"]  # replaced where it was
    assert cfg.for_model("price").model.task == "binary"
    assert path.read_text().count("  price:") == 1


def test_models_dir_gets_a_file_of_the_model(tmp_path, data):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "churn.yaml").write_text("model: {target: label}   # churn, by hand\n")
    path = tmp_path / "driftloop.yaml"
    path.write_text(f"home: {tmp_path / 'home'}\nmodels_dir: models\n")
    assert main(["--config", str(path), "init", "--data", str(data["price"]), "--target", "label",
                 "--model", "price"]) == 0
    assert path.read_text() == f"home: {tmp_path / 'home'}\nmodels_dir: models\n"
    cfg = load_config(path, environ={})
    assert list(cfg.model_configs()) == ["churn", "price"]
    assert cfg.for_model("price").model.task == "regression"
    assert "model:" in (tmp_path / "models" / "price.yaml").read_text()


def test_a_file_that_would_not_load_is_left_as_it_was(tmp_path, data, capsys):
    path = tmp_path / "driftloop.yaml"
    path.write_text(f"home: {tmp_path / 'home'}\nmodels:\n  Price:\n    model: {{target: label}}\n")
    # price's tables would be Price's: the loader refuses, so init writes nothing
    assert init("--data", str(data["price"]), "--model", "price") == 2
    assert "would not load" in capsys.readouterr().err
    assert path.read_text() == f"home: {tmp_path / 'home'}\nmodels:\n  Price:\n    model: {{target: label}}\n"
    assert init("--data", str(data["price"]), "--model", "no/slash") == 2
    assert "--model 'no/slash'" in capsys.readouterr().err


def test_a_layout_the_edit_does_not_know_is_rewritten_from_the_data(tmp_path, data, capsys):
    path = tmp_path / "driftloop.yaml"
    path.write_text(f"home: {tmp_path / 'home'}\nmodels: {{churn: {{model: {{target: label}}}}}}   # flow\n")
    assert init("--data", str(data["price"]), "--model", "price") == 0
    assert "without its comments" in capsys.readouterr().err
    cfg = load_config(path, environ={})
    assert list(cfg.model_configs()) == ["churn", "price"] and cfg.home == tmp_path / "home"


def test_without_a_file_model_names_the_one_model_written(tmp_path, data, capsys):
    assert init("--data", str(data["price"]), "--model", "price") == 0
    cfg = load_config(tmp_path / "driftloop.yaml", environ={})
    assert not cfg.is_fleet and cfg.model.name == "price" and cfg.model.task == "regression"
    assert init("--data", str(data["price"]), "--model", "price", "--name", "other") == 2
    assert "--name" in capsys.readouterr().err
    # without --model, init is what it was: an existing file is not touched without --force
    assert init("--data", str(data["churn"])) == 2
    assert load_config(tmp_path / "driftloop.yaml", environ={}).model.name == "price"


def test_a_file_without_a_model_section_keeps_its_model_by_the_defaults(tmp_path, data, capsys):
    path = tmp_path / "driftloop.yaml"
    path.write_text(f"home: {tmp_path / 'home'}   # here\nmodels: {{}}\n")
    assert init("--data", str(data["price"]), "--model", "price") == 0
    assert "without its comments" not in capsys.readouterr().err
    cfg = load_config(path, environ={})
    assert list(cfg.model_configs()) == ["demo", "price"]  # the embedded model it described, and price
    assert cfg.for_model("demo").model.model_dump() == ModelConfig().model_dump()
    assert "# here" in path.read_text() and path.read_text().count("models:") == 1
