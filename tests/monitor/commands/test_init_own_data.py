"""``driftloop init`` on public datasets as they come (issue 24, "a user's own data, second pass"):
a passenger or customer number is the record id, not a feature; a column with a reserved name is
refused with the reason; a small file gets a drift.min_labels it can reach; the model's name comes
from the file's without its role (``_reference``)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from monitor.cli import main
from monitor.commands.init import default_name
from monitor.config import load_config
from monitor.dataschema import id_like_name, propose_id


def titanic(n: int = 300, seed: int = 0) -> pd.DataFrame:
    """Kaggle's Titanic train.csv in shape: PassengerId 1..n, the outcome, numbers with gaps, text."""
    rng = np.random.default_rng(seed)
    age = rng.normal(30, 14, n).round(1)
    age[rng.random(n) < 0.2] = np.nan
    return pd.DataFrame({"PassengerId": np.arange(1, n + 1), "Survived": rng.integers(0, 2, n),
                         "Pclass": rng.integers(1, 4, n), "Sex": rng.choice(["male", "female"], n), "Age": age,
                         "Fare": rng.gamma(2, 15, n).round(4), "Alone": rng.random(n) < 0.6})


def init(tmp_path: Path, capsys, *args: str) -> tuple[int, str, str]:
    code = main(["init", "--output", str(tmp_path / "driftloop.yaml"), "--force", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_titanic_passenger_id_is_the_id_and_the_small_file_gets_a_reachable_min_labels(tmp_path, capsys):
    data = tmp_path / "titanic_reference.csv"
    titanic().to_csv(data, index=False)
    code, out, err = init(tmp_path, capsys, "--data", str(data), "--target", "Survived")
    assert code == 0, err
    assert "Using column 'PassengerId' as the record id (integers, unique on every row, named like an id" in err
    cfg = load_config(tmp_path / "driftloop.yaml", environ={})  # the file loads as train and serve will load it
    assert cfg.model.id == "PassengerId" and "PassengerId" not in cfg.model.feature_names
    assert cfg.model.feature_names == ["Pclass", "Sex", "Age", "Fare", "Alone"]
    assert cfg.model.name == "titanic" and "model 'titanic'" in out
    text = (tmp_path / "driftloop.yaml").read_text()
    assert "id: PassengerId    # taken by init: integers, unique on every row, named like an id" in text
    # 300 rows never fill a 1000-label window (the most the default, auto, asks): a reachable value is written.
    assert cfg.drift.min_labels == 150
    assert "min_labels: 150    # " in text and "fewer than the 1000 labelled rows a window may need" in text
    assert "wrote drift.min_labels: 150" in err and "DRIFTLOOP_DRIFT__MIN_LABELS" in err

    code, _, err = init(tmp_path, capsys, "--data", str(data), "--target", "Survived", "--id", "Pclass")
    assert code == 0, err
    model = yaml.safe_load((tmp_path / "driftloop.yaml").read_text())["model"]
    assert model["id"] == "Pclass" and "Using column" not in err
    # PassengerId is still an id by its values and name: left out, said so, --keep to use it.
    assert "PassengerId" in model["ignore"] and "PassengerId" not in [f["name"] for f in model["features"]]
    assert "Left out column 'PassengerId': a record id" in err and "--keep PassengerId" in err


def test_a_customer_id_in_text_a_row_number_and_what_is_no_id(tmp_path, capsys):
    rng = np.random.default_rng(1)
    n = 1200
    frame = pd.DataFrame({"customerID": [f"{i:04d}-{rng.choice(list('ABCDEFG'))}" for i in range(n)],
                          "tenure": rng.integers(0, 72, n), "balance_cents": rng.permutation(n) * 7 + 3,
                          "charges": rng.random(n) * 100, "Churn": rng.choice(["No", "Yes"], n)})
    data = tmp_path / "WA_Fn-UseC_-Telco-Customer-Churn.csv"
    frame.to_csv(data, index=False)
    code, out, err = init(tmp_path, capsys, "--data", str(data), "--target", "Churn")
    assert code == 0, err
    cfg = load_config(tmp_path / "driftloop.yaml", environ={})
    assert cfg.model.id == "customerID" and "text, unique on every row, named like an id" in err
    # Unique integers without an id's name or a row number's steps, and unique floats, stay features.
    assert cfg.model.feature_names == ["tenure", "balance_cents", "charges"]
    assert cfg.drift.min_labels == "auto" and "drift:" not in (tmp_path / "driftloop.yaml").read_text()
    assert "min_labels" not in err and cfg.model.name == "wa_fn_usec_telco_customer_churn"

    assert propose_id(pd.DataFrame({"Unnamed: 0": range(30), "x": np.arange(30.0) * 2})).name == "Unnamed: 0"
    assert propose_id(pd.DataFrame({"id_float": np.arange(30.0), "flag": [True, False] * 15})) is None
    gaps = pd.DataFrame({"PassengerId": [*range(29), None]})
    assert propose_id(gaps) is None  # a missing id is no id
    assert propose_id(pd.DataFrame({"row_no": range(10)})) is None  # too few rows to tell


def test_a_saved_index_and_a_second_id_are_left_out_not_features(tmp_path, capsys):
    # A shuffled split written with pandas' index (to_csv's default) beside the real id, and NannyML's
    # "identifier": as features each would drift for ever, since every later row brings a new value.
    frame = titanic(400).sample(frac=1.0, random_state=3)
    frame.insert(1, "identifier", np.random.default_rng(4).permutation(len(frame)))
    data = tmp_path / "titanic_train.csv"
    frame.to_csv(data)  # index=True: the first column comes back as "Unnamed: 0"
    code, _, err = init(tmp_path, capsys, "--data", str(data), "--target", "Survived")
    assert code == 0, err
    cfg = load_config(tmp_path / "driftloop.yaml", environ={})
    # The real id wins over the saved index, which comes first in the file.
    assert cfg.model.id == "PassengerId"
    assert cfg.model.feature_names == ["Pclass", "Sex", "Age", "Fare", "Alone"]
    assert {"Unnamed: 0", "identifier"} <= set(cfg.model.ignore)
    assert "Left out column 'Unnamed: 0': a record id (integers, unique on every row, a saved DataFrame index" in err
    assert "Left out column 'identifier': a record id (integers, unique on every row, named like an id)" in err
    assert "pass --keep identifier" in err
    text = (tmp_path / "driftloop.yaml").read_text()
    assert "#   identifier: left out by init, a record id" in text and "--keep identifier to use it" in text

    code, _, err = init(tmp_path, capsys, "--data", str(data), "--target", "Survived", "--keep", "identifier")
    assert code == 0, err
    cfg = load_config(tmp_path / "driftloop.yaml", environ={})
    assert cfg.model.feature_names[0] == "identifier" and "Unnamed: 0" in cfg.model.ignore
    assert "looks like a record id, kept by --keep" in (tmp_path / "driftloop.yaml").read_text()


@pytest.mark.parametrize("name, like", [
    ("id", True), ("Id", True), ("PassengerId", True), ("customerID", True), ("customer_number", True),
    ("account_no", True), ("RowNumber", True), ("order-key", True), ("uuid", True),
    ("idle_minutes", False), ("width", False), ("number_of_kids", False), ("paid", False), ("no", False),
    ("Pclass", False), ("ident", False), ("identifier", True), ("Unnamed: 0", True), ("index", True),
    ("idx", True), ("price_index", False), ("indexed", False)])
def test_names_of_ids(name, like):
    assert id_like_name(name) is like


@pytest.mark.parametrize("path, name", [
    ("titanic_reference.csv", "titanic"), ("Churn-Train-2024.parquet", "churn"),
    ("data/train_titanic.csv.gz", "titanic"),
    ("sub/titanic/train.csv", "titanic"), ("My Model v2.csv", "my_model_v2"), ("x" * 60 + ".csv", "x" * 48)])
def test_the_default_name_is_the_files_without_its_role(tmp_path, path, name):
    assert default_name(str(tmp_path / path)) == name


def test_a_column_with_a_reserved_name_is_refused_with_the_reason(tmp_path, capsys):
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"id": [f"r{i}" for i in range(50)], "ts": rng.random(50) * 1e9, "x": rng.normal(size=50),
                          "customer": [f"c{i}" for i in range(50)], "y": rng.integers(0, 2, 50)})
    frame.to_csv(tmp_path / "events.csv", index=False)
    code, _, err = init(tmp_path, capsys, "--data", str(tmp_path / "events.csv"), "--target", "y", "--ignore",
                        "customer")
    assert code != 0
    assert "column 'ts' has a name reserved for the prediction's time, so it cannot be a feature: pass " \
           "--ignore ts or rename the column in your data (e.g. ts_value)" in err
    assert "pydantic" not in err and "errors.pydantic.dev" not in err
    assert init(tmp_path, capsys, "--data", str(tmp_path / "events.csv"), "--target", "y", "--ignore", "ts",
                "--ignore", "customer")[0] == 0

    # Another record id chosen: the column named id cannot be a feature either.
    code, _, err = init(tmp_path, capsys, "--data", str(tmp_path / "events.csv"), "--target", "y", "--ignore", "ts",
                        "--id", "customer")
    assert code != 0 and "column 'id' has a name reserved for" in err and "--ignore id, --id id if it is" in err

    # A model output kept by --keep under the reserved name of the score column.
    frame.assign(score=rng.random(50)).drop(columns=["ts"]).to_csv(tmp_path / "scored.csv", index=False)
    code, _, err = init(tmp_path, capsys, "--data", str(tmp_path / "scored.csv"), "--target", "y", "--keep", "score")
    assert code != 0 and "column 'score' has a name reserved for the model's score column (model.score)" in err


def test_a_config_init_cannot_write_says_why_without_pydantics_link(tmp_path, capsys):
    rng = np.random.default_rng(3)
    pd.DataFrame({"Age": rng.normal(size=40), "age": rng.normal(size=40), "y": rng.integers(0, 2, 40)}).to_csv(
        tmp_path / "cases.csv", index=False)
    code, _, err = init(tmp_path, capsys, "--data", str(tmp_path / "cases.csv"), "--target", "y")
    assert code != 0
    assert err.strip() == "Error: cannot write a valid config: duplicate feature names (case-insensitive): Age, age"
