"""A user's own CSV through `driftloop init` and `driftloop train` (the real CLI entry, in-process):
codes written with leading zeros stay text from the file to the served model, train takes the
record id init takes, and a multiclass split names its classes."""
from __future__ import annotations

import json
import logging

import numpy as np
import pandas as pd

from monitor.cli import main
from monitor.config import ModelConfig, load_config
from trainer.data import check_frame, split

ZIPS = ["01001", "02002", "07501", "13008", "69001"]


def zip_rows(n: int = 600, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    zips = rng.choice(ZIPS, n)
    return pd.DataFrame({"zip": zips, "x": rng.normal(0, 1, n),
                         "y": np.where(np.isin(zips, ["01001", "02002"]), "yes", "no")})


def served(home, name: str, features: pd.DataFrame) -> np.ndarray:
    import mlflow
    import mlflow.pyfunc
    mlflow.set_tracking_uri(f"sqlite:///{home / 'mlflow.db'}")
    try:
        return np.asarray(mlflow.pyfunc.load_model(f"models:/{name}@champion").predict(features), dtype=float)
    finally:
        mlflow.set_tracking_uri(None)  # type: ignore[arg-type]


def test_zip_codes_with_leading_zeros_stay_text_from_init_to_the_served_model(home, tmp_path, capsys):
    zip_rows().to_csv(tmp_path / "zips.csv", index=False)
    assert "01001," in (tmp_path / "zips.csv").read_text()  # written as the user has them

    assert main(["init", "--data", "zips.csv", "--target", "y"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    cfg = load_config(tmp_path / "driftloop.yaml")
    assert cfg.model.categorical_features == ["zip"]  # not numeric 1001, 2002, ...
    assert "text, 5 value(s): 01001, 02002, 07501, 13008, 69001" in (tmp_path / "driftloop.yaml").read_text()

    assert main(["train", "--data", "zips.csv", "--quiet"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    from trainer import load_champion
    assert sorted(load_champion(cfg).model.vocab["zip"]) == ZIPS

    # The service sends the code as text, as written: scored like the training rows, not as unseen.
    scores = served(home, cfg.registered_model_name,
                    pd.DataFrame({"zip": ["01001", "02002", "13008", "69001"], "x": [0.0] * 4}))
    assert (scores[:2] > 0.5).all() and (scores[2:] < 0.5).all(), scores
    rows = pd.read_csv(tmp_path / "zips.csv", dtype={"zip": str}).head(200)
    predicted = served(home, cfg.registered_model_name, rows[["zip", "x"]]) > 0.5
    assert (predicted == (rows["y"] == "yes")).mean() > 0.95


def test_a_configured_categorical_code_is_read_as_the_files_text(home, tmp_path, capsys):
    rows = zip_rows(seed=1)
    # Release codes a number parse changes ("1.10" -> 1.1, "2.0" -> 2): declared categorical, kept as written.
    rows["zip"] = rows["zip"].map(dict(zip(ZIPS, ["1.10", "1.2", "2.0", "10", "3.00"])))
    rows.loc[::7, "zip"] = None
    rows.to_csv(tmp_path / "codes.csv", index=False)
    (tmp_path / "driftloop.yaml").write_text(json.dumps({"model": {
        "name": "codes", "target": "y", "features": [{"name": "zip", "type": "categorical"},
                                                     {"name": "x", "type": "numeric"}]}}))
    assert main(["train", "--data", "codes.csv", "--quiet"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    from trainer import load_champion
    vocab = load_champion(load_config(tmp_path / "driftloop.yaml")).model.vocab["zip"]
    assert {"1.10", "1.2", "2.0", "10", "3.00"} <= set(vocab)


def test_train_without_a_config_takes_the_record_id_init_takes(home, tmp_path, capsys):
    rng = np.random.default_rng(2)
    n = 600
    plan = rng.choice(["basic", "plus", "pro"], n)
    frame = pd.DataFrame({"customerID": [f"{i:04d}-{rng.choice(list('ABCDEFG'))}" for i in range(n)],
                          "has_app": rng.random(n) < 0.5, "plan": plan, "tenure": rng.integers(0, 72, n),
                          "churn": np.where((plan == "basic") ^ (rng.random(n) < 0.1), "churned", "stayed")})
    frame.to_csv(tmp_path / "idcheck.csv", index=False)

    assert main(["init", "--data", "idcheck.csv", "--target", "churn", "--output", "init.yaml"]) == 0
    assert "Using column 'customerID' as the record id" in capsys.readouterr().err

    assert main(["train", "--data", "idcheck.csv", "--target", "churn", "--quiet"]) == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    assert "Using column 'customerID' as the record id (text, unique on every row, named like an id" in err
    assert "plan (categorical)" in err and "customerID (" not in err

    from mlflow import MlflowClient
    uri = f"sqlite:///{home / 'mlflow.db'}"
    tags = MlflowClient(tracking_uri=uri, registry_uri=uri).get_model_version("driftloop-demo", "1").tags
    columns = json.loads(tags["driftloop.columns"])
    assert columns["id"] == "customerID"


def test_the_multiclass_split_warning_names_classes_by_name(caplog):
    classes = [f"k{i}" for i in range(14)]
    model = ModelConfig.model_validate({"task": "multiclass", "classes": classes, "target": "label",
                                        "features": [{"name": "x", "type": "numeric"}]})
    labels = [c for c in classes[:12] for _ in range(20)] + ["k12", "k13", "k13"]
    frame = check_frame(pd.DataFrame({"x": np.arange(len(labels), dtype=float), "label": labels}), model)
    with caplog.at_level(logging.WARNING, logger="trainer.data"):
        rest, _ = split(frame, 0.2, "label", 0, what="training data", part="test", task="multiclass")
        split(rest, 0.2, "label", 1, what="training data", task="multiclass")
    warned = [r.getMessage() for r in caplog.records]
    assert warned and all("class(es) k12 (1 row(s)), k13 (2 row(s)) have too few rows" in m for m in warned), warned
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="trainer.data"):
        split(frame.assign(label=frame["label"]).copy(), 0.2, "label", 0, task="multiclass", classes=classes)
    assert "k12 (1 row(s))" in caplog.text
