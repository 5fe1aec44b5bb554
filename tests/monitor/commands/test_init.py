"""``driftloop init`` per task: the task inferred from the target (or chosen), the classes written
down, and a model's own outputs beside its inputs (``y_pred``, ``proba_<class>``, unnamed
probabilities that sum to 1) left out of the features with a warning, unless kept."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from monitor.cli import main
from monitor.dataschema import Omission, infer_schema, model_outputs, output_name, probability_groups, resolve_task

CLASSES = ["bird", "cat", "dog"]


def scored_three_classes(n: int = 400, seed: int = 0) -> pd.DataFrame:
    """Issue 20's file: features, the true class as text, and beside them the model's outputs: the
    predicted class and one probability per class."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    logits = np.c_[x[:, 0], x[:, 1], -x[:, 0] - x[:, 1]]
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    truth = [CLASSES[rng.choice(3, p=p)] for p in proba]
    frame = pd.DataFrame({"id": [f"r{i}" for i in range(n)], "f0": x[:, 0], "f1": x[:, 1], "f2": x[:, 2],
                          "colour": rng.choice(["red", "blue"], n), "y_true": truth,
                          "y_pred": np.asarray(CLASSES)[proba.argmax(axis=1)]})
    for i, c in enumerate(CLASSES):
        frame[f"y_pred_proba_{c}"] = proba[:, i].round(4)
    return frame


def init(tmp_path: Path, capsys, *args: str) -> tuple[int, str, str]:
    code = main(["init", "--output", str(tmp_path / "driftloop.yaml"), "--force", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def written(tmp_path: Path) -> dict:
    return yaml.safe_load((tmp_path / "driftloop.yaml").read_text())["model"]


def test_three_classes_with_the_models_probabilities_beside_them(tmp_path, capsys):
    scored_three_classes().to_csv(tmp_path / "reference.csv", index=False)
    code, out, err = init(tmp_path, capsys, "--data", str(tmp_path / "reference.csv"), "--target", "y_true")
    assert code == 0, err
    model = written(tmp_path)
    assert (model["task"], model["classes"]) == ("multiclass", CLASSES)
    assert [f["name"] for f in model["features"]] == ["f0", "f1", "f2", "colour"]
    outputs = ["y_pred", *(f"y_pred_proba_{c}" for c in CLASSES)]
    assert model["ignore"] == outputs
    text = (tmp_path / "driftloop.yaml").read_text()
    assert "0/1" not in text.split("model:")[1]
    assert "target: y_true    # the true class, one of classes" in text
    assert "task: multiclass    # 3 distinct classes" in text
    for name in outputs:  # each one warned about, with the way to keep it
        assert f"Warning: column {name!r} looks like a model output" in err and f"--keep {name}" in err
        assert f"#   {name}: left out by init, a model output" in text
    assert "multiclass (3 classes)" in out

    code, _, err = init(tmp_path, capsys, "--data", str(tmp_path / "reference.csv"), "--target", "y_true",
                        "--keep", "y_pred_proba_cat")
    assert code == 0, err
    model = written(tmp_path)
    assert "y_pred_proba_cat" in [f["name"] for f in model["features"]]
    assert "y_pred_proba_cat" not in model["ignore"] and "--keep y_pred_proba_cat" not in err
    assert "Warning: column 'y_pred_proba_cat' looks like a model output; kept as a feature (--keep)" in err
    assert "looks like a model output, kept by --keep" in (tmp_path / "driftloop.yaml").read_text()


def test_unnamed_probabilities_are_found_by_their_sum_and_one_hot_columns_are_not(tmp_path, capsys):
    frame = scored_three_classes().drop(columns=["y_pred"])
    frame = frame.rename(columns={f"y_pred_proba_{c}": c for c in CLASSES})
    frame["is_red"] = (frame["colour"] == "red").astype(int)   # one-hot: sums to 1, but 0/1, a feature
    frame["is_blue"] = 1 - frame["is_red"]
    frame["share"] = np.random.default_rng(1).random(len(frame))  # in [0, 1], not part of a sum
    assert probability_groups(frame, ["f0", "is_red", "is_blue", "share", *CLASSES]) == [CLASSES]
    frame.to_csv(tmp_path / "unnamed.csv", index=False)
    code, _, err = init(tmp_path, capsys, "--data", str(tmp_path / "unnamed.csv"), "--target", "y_true")
    assert code == 0, err
    model = written(tmp_path)
    assert model["ignore"] == CLASSES
    assert {"is_red", "is_blue", "share"} <= {f["name"] for f in model["features"]}
    schema = infer_schema(frame, "y_true", classes=CLASSES)
    assert {c.name: c.kind for c in schema.left_out} == dict.fromkeys(CLASSES, Omission.MODEL_OUTPUT)


@pytest.mark.parametrize("name, output", [
    ("y_pred", True), ("ypred", True), ("y_hat", True), ("pred", True), ("prediction", True), ("predicted_class", True),
    ("score", True), ("risk_score", True), ("proba_cat", True), ("prob_cat", True), ("cat_proba", True),
    ("cat_probability", True), ("y_pred_proba_0", True), ("logits", True), ("confidence", True), ("p_cat", True),
    ("p_eel", False), ("problem_count", False), ("probation_months", False), ("predecessor", False),
    ("tenure", False), ("scored_at_hour", False), ("age", False)])
def test_names_of_model_outputs(name, output):
    assert (output_name(name, ["cat", "dog"]) is not None) is output


def credit_cards(n: int = 600, seed: int = 0) -> pd.DataFrame:
    """NannyML's multiclass file in small (issue 37): two inputs named like scores, with values no
    probability has, beside the model's predicted class and its probabilities."""
    rng = np.random.default_rng(seed)
    cards = ["highstreet_card", "prepaid_card", "upmarket_card"]
    proba = rng.dirichlet(np.ones(3), n).round(4)
    proba[:, 2] = (1 - proba[:, 0] - proba[:, 1]).round(4)
    frame = pd.DataFrame({"acq_channel": rng.choice(["Partner", "Organic"], n),
                          "app_behavioral_score": rng.uniform(-7.7, 9.8, n).round(3),
                          "credit_bureau_score": np.r_[300, 799, rng.integers(300, 800, n - 2)],
                          "y_pred": np.asarray(cards)[proba.argmax(axis=1)],
                          "y_true": rng.choice(cards, n)})
    for i, c in enumerate(cards):
        frame[f"y_pred_proba_{c}"] = proba[:, i]
    return frame


def test_inputs_named_like_scores_stay_features_by_their_values(tmp_path, capsys):
    """credit_bureau_score (300-799) and app_behavioral_score (-7.7 to 9.8) are inputs: no
    probability or class holds such values; y_pred and its probabilities are still left out."""
    credit_cards().to_csv(tmp_path / "cards.csv", index=False)
    code, _, err = init(tmp_path, capsys, "--data", str(tmp_path / "cards.csv"), "--target", "y_true")
    assert code == 0, err
    model = written(tmp_path)
    assert model["ignore"] == ["y_pred", "y_pred_proba_highstreet_card", "y_pred_proba_prepaid_card",
                               "y_pred_proba_upmarket_card"]
    features = {f["name"]: f["type"] for f in model["features"]}
    assert features == {"acq_channel": "categorical", "app_behavioral_score": "numeric",
                        "credit_bureau_score": "numeric"}
    assert "'credit_bureau_score'" not in err and "'app_behavioral_score'" not in err  # no warning
    text = (tmp_path / "driftloop.yaml").read_text()
    assert "named like a score, but holds values 300 to 799, not numbers" in text  # the note says why


def _scan(target: pd.Series, column: pd.Series, name: str = "c") -> str:
    """What model_outputs makes of one column beside ``target``: "output", "input" or "feature"."""
    scan = model_outputs(pd.DataFrame({"t": target, name: column}), [name], classes=["cat", "dog"], target="t")
    assert [c.kind for c in scan.outputs] in ([], [Omission.MODEL_OUTPUT])
    return "output" if scan.outputs else "input" if name in scan.inputs else "feature"


RNG = np.random.default_rng(7)
BINARY = pd.Series(RNG.integers(0, 2, 200))
PETS = pd.Series(RNG.choice(["cat", "dog"], 200))
PRICE = pd.Series(RNG.normal(300_000, 80_000, 200).round())


@pytest.mark.parametrize("case, target, name, column, kind", [
    ("a score in [0, 1]", BINARY, "risk_score", RNG.random(200), "output"),
    ("a credit score", BINARY, "credit_score", RNG.integers(300, 850, 200), "input"),
    ("a behavioural score", PETS, "app_behavioral_score", RNG.uniform(-7.7, 9.8, 200), "input"),
    ("a score in the target's classes", PETS, "score", PETS.iloc[::-1].to_numpy(), "output"),
    ("predicted 0/1", BINARY, "y_pred", RNG.integers(0, 2, 200).astype(float), "output"),
    ("predicted booleans", BINARY, "prediction", RNG.random(200) > 0.5, "output"),
    ("predicted classes", PETS, "y_pred", PETS.sample(frac=1, random_state=0).to_numpy(), "output"),
    ("a prediction of something else", PETS, "y_pred", RNG.choice(["red", "blue"], 200), "input"),
    ("a horizon in days", BINARY, "prediction_horizon_days", RNG.integers(1, 31, 200), "input"),
    ("a predicted price", PRICE, "predicted_price", (PRICE * 1.05).to_numpy(), "output"),
    ("rooms beside a price", PRICE, "predicted_rooms", RNG.integers(1, 9, 200), "input"),
    ("a confidence in per cent", BINARY, "confidence", RNG.uniform(0, 100, 200), "input"),
    ("a class probability", PETS, "p_cat", RNG.random(200), "output"),
    ("a class probability out of range", PETS, "p_cat", RNG.integers(3, 10, 200), "input"),
    ("logits", PETS, "logits", RNG.normal(0, 4, 200), "output"),
    ("not an output's name", BINARY, "age", RNG.integers(18, 90, 200), "feature"),
])
def test_a_column_named_like_an_output_is_one_only_with_an_outputs_values(case, target, name, column, kind):
    assert _scan(target, pd.Series(column), name) == kind, case


def test_the_task_per_target(tmp_path, capsys):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=300), "kind": rng.choice(["a", "b"], 300),
                          "price": rng.normal(100, 15, 300).round(2), "churned": rng.integers(0, 2, 300),
                          "answer": rng.choice(["no", "yes"], 300), "grade": rng.integers(1, 31, 300)})
    frame.to_csv(tmp_path / "t.csv", index=False)
    data = str(tmp_path / "t.csv")
    others = ["price", "churned", "answer", "grade"]

    def run(target: str, *extra: str) -> dict:
        ignore = [a for c in others if c != target for a in ("--ignore", c)]
        code, _, err = init(tmp_path, capsys, "--data", data, "--target", target, *ignore, *extra)
        assert code == 0, err
        return written(tmp_path)

    model = run("price")
    assert (model["task"], model.get("classes")) == ("regression", None)
    assert "target: price    # the true value, a number" in (tmp_path / "driftloop.yaml").read_text()
    model = run("churned")  # 0/1: binary as before, the target comment unchanged
    assert (model["task"], model.get("classes")) == ("binary", None)
    assert "target: churned    # the 0/1 outcome" in (tmp_path / "driftloop.yaml").read_text()
    model = run("answer")
    assert (model["task"], model["classes"]) == ("binary", ["no", "yes"])   # quoted: not YAML booleans
    assert run("grade")["task"] == "regression"  # 30 integers: a quantity ...
    model = run("grade", "--task", "multiclass")  # ... unless they are class ids
    assert (model["task"], model["classes"]) == ("multiclass", [str(i) for i in range(1, 31)])
    assert "chosen with --task" in (tmp_path / "driftloop.yaml").read_text()

    code, _, err = init(tmp_path, capsys, "--data", data, "--target", "kind", "--task", "regression")
    assert code != 0 and err.startswith("Error: target 'kind' holds values that are not numbers")
    code, _, err = init(tmp_path, capsys, "--data", data, "--target", "grade", "--task", "binary")
    assert code != 0 and "a binary target has two" in err


def test_train_takes_the_same_task_flag(tmp_path, capsys, monkeypatch):
    """`driftloop train --task` is checked against the target as init's is, before any training."""
    monkeypatch.chdir(tmp_path)
    pd.DataFrame({"x": np.arange(40.0), "kind": ["a", "b"] * 20}).to_csv("t.csv", index=False)
    assert main(["train", "--data", "t.csv", "--target", "kind", "--task", "regression"]) != 0
    assert capsys.readouterr().err.startswith("Error: target 'kind' holds values that are not numbers")


def test_resolve_task_checks_the_chosen_task_against_the_values():
    assert resolve_task(pd.Series([0, 1, 1], name="y")).classes is None
    assert resolve_task(pd.Series(["a", "b", "c"], name="y")).classes == ["a", "b", "c"]
    assert resolve_task(pd.Series([0, 1, 1], name="y"), "multiclass").classes == ["0", "1"]
    assert resolve_task(pd.Series([1.5, 2.5, 3.0], name="y"), "regression").task == "regression"


@pytest.mark.slow
def test_init_then_train_on_a_three_class_file_with_the_models_outputs(tmp_path):
    """Issue 20's first paragraph, end to end: init on the file as it is, then train from the
    written config; the registered model is multiclass over the text classes and learnt from the
    features only."""
    import mlflow

    from tests.test_own_model import driftloop
    scored_three_classes(600).to_csv(tmp_path / "tickets_reference.csv", index=False)
    init_out = driftloop(tmp_path, "init", "--data", "tickets_reference.csv", "--target", "y_true")
    assert "Warning: column 'y_pred_proba_dog' looks like a model output" in init_out.stderr
    trained = driftloop(tmp_path, "train", "--data", "tickets_reference.csv", "--epochs", "3", "-q")
    assert "Registered driftloop-tickets v1 (champion) (multiclass)" in trained.stdout, trained.stdout
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'driftloop-data' / 'mlflow.db'}")
    version = client.get_model_version_by_alias("driftloop-tickets", "champion")
    assert set(yaml.safe_load(version.tags["driftloop.schema"])) == {"f0", "f1", "f2", "colour"}
    columns = yaml.safe_load(version.tags["driftloop.columns"])
    assert (columns["task"], columns["classes"]) == ("multiclass", CLASSES)


def test_a_path_the_system_refuses_is_one_error_line_not_a_traceback(tmp_path, capsys):
    scored_three_classes().to_csv(tmp_path / "reference.csv", index=False)
    code = main(["init", "--data", str(tmp_path / "reference.csv"), "--target", "y_true",
                 "--output", str(tmp_path / "no-such-folder" / "x.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert err.startswith("Error: ") and "no-such-folder" in err and "No such file or directory" in err, err
