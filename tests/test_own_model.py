"""A user's own data and model service, end to end, with zero hand-written config lines: a CSV with
int, float, bool, categorical and id columns, missing values and a target called ``churned``,
through ``init``, ``train``, ``serve``, the client and plain HTTP, ``check``, ``retrain``,
``rollback`` and the registered pyfunc on the raw frame. Then the mistakes a user makes, each one
clear line."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest

from monitor.client import DriftloopClient
from tests.support.churn import churn_table
from tests.support.services import free_port, wait_answering

REPO = Path(__file__).resolve().parents[1]
DRIFTLOOP = [sys.executable, "-c", "import sys; from monitor.cli import main; sys.exit(main(sys.argv[1:]))"]
FAST = {"DRIFTLOOP_TRAINING__RETRAIN_EPOCHS": "6", "DRIFTLOOP_TRAINING__HIDDEN": "[32, 16]",
        "DRIFTLOOP_TRAINING__THREADS": "1", "DRIFTLOOP_LOGGING__LEVEL": "WARNING"}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DRIFTLOOP_", "MLFLOW_"))}
    return {**env, **FAST, "PYTHONPATH": str(REPO)}


def driftloop(cwd: Path, *args: str, ok: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run([*DRIFTLOOP, *args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    if ok:
        assert proc.returncode == 0, f"driftloop {' '.join(args)}: {proc.stdout}\n{proc.stderr}"
    return proc


def error_line(proc: subprocess.CompletedProcess) -> str:
    """The one line a user mistake prints: 'Error: ...' on stderr, and nothing else."""
    assert proc.returncode != 0, proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), proc.stderr
    return lines[0]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    churn_table(1500, seed=0).to_csv(tmp_path / "churn.csv", index=False)
    return tmp_path


def champion_pyfunc(cwd: Path):
    import mlflow
    previous = mlflow.get_tracking_uri() if mlflow.is_tracking_uri_set() else None
    mlflow.set_tracking_uri(f"sqlite:///{cwd / 'driftloop-data' / 'mlflow.db'}")
    try:
        return mlflow.pyfunc.load_model("models:/driftloop-churn@champion")
    finally:
        mlflow.set_tracking_uri(previous)


@pytest.mark.slow
def test_own_csv_and_service_through_the_whole_loop(project: Path):
    # init: the customer number (text, unique on every row, named like an id) is taken as the record
    # id and said so; --id names it explicitly; then a commented config.
    taken = driftloop(project, "init", "--data", "churn.csv", "--target", "churned").stderr
    assert "Using column 'customer_id' as the record id (text, unique on every row, named like an id" in taken
    out = driftloop(project, "init", "--data", "churn.csv", "--target", "churned", "--id", "customer_id",
                    "--force").stdout
    assert "4 numeric and 2 categorical" in out
    text = (project / "driftloop.yaml").read_text()
    assert ("{name: is_senior, type: numeric}" in text and "boolean" in text
            and "{name: plan, type: categorical}" in text)
    assert "customer_id" not in text.split("features:")[1]

    driftloop(project, "train", "--data", "churn.csv", "--epochs", "8", "-q")

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(project / "serve.log", "wb")
    serve = subprocess.Popen([*DRIFTLOOP, "serve", "--port", str(port), "--no-gpu", "--check-interval", "3600"],
                             cwd=project, env=_env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_healthy(url, serve, project)
        champion = champion_pyfunc(project)
        # The service's traffic after the concept moved: raw rows, nulls and all, scored by the champion.
        live = churn_table(700, seed=1, shift=1.0, missing=0.1)
        live.loc[live.index[:20], "plan"] = "enterprise"  # a category the model never saw
        live["score"] = champion.predict(live.drop(columns=["churned"]))
        with DriftloopClient(url) as dl:
            assert dl.log_predictions(live.drop(columns=["churned"])).stored == 700
            assert dl.log_labels(live[["customer_id", "churned"]]).stored == 700
        # Plain HTTP (curl): a null feature, and a label under the target's name.
        record = {"id": "curl-1", "features": {"age": 40, "tenure": None, "monthly_charges": 55.5,
                                               "is_senior": 0, "plan": None, "region": "east"}, "score": 0.4}
        assert httpx.post(f"{url}/v1/predictions", json=[record]).status_code == 200
        assert httpx.post(f"{url}/v1/labels", json=[{"id": "curl-1", "churned": 1}]).status_code == 200
        wrong = httpx.post(f"{url}/v1/predictions", json=[{**record, "id": "curl-2",
                                                           "features": {**record["features"], "plan": 3}}])
        assert wrong.status_code == 422
        assert wrong.json()["errors"] == [{"index": 0, "field": "features.plan",
                                           "message": "expected a string (categorical feature), got 3"}]
        metrics = httpx.get(f"{url}/metrics").text
        assert "driftloop_ingest" in metrics

        check = driftloop(project, "check").stdout
        assert "missing" in check and "monthly_charges" in check and "plan" in check
        assert "unseen  plan: 1 value(s) not in the champion's reference, scored as unknown: enterprise" in check

        retrained = driftloop(project, "retrain", "-q", timeout=600).stdout
        assert retrained.startswith("PROMOTED: challenger v2"), retrained
        # A CLI retrain is recorded like the daemon's: in the status and in driftloop_retrains_total.
        status = httpx.get(f"{url}/v1/status").json()
        assert status["recent_retrains"][0]["status"] == "promoted"
        assert status["recent_retrains"][0]["challenger_version"] == "2"
        assert 'driftloop_retrains_total{model="churn",outcome="promoted"} 1.0' in httpx.get(f"{url}/metrics").text
        assert champion_pyfunc(project).metadata.run_id != champion.metadata.run_id
        rolled = driftloop(project, "rollback").stdout
        assert "v2" in rolled and "v1" in rolled
        assert champion_pyfunc(project).metadata.run_id == champion.metadata.run_id
    finally:
        serve.terminate()
        serve.wait(30)

    # The registered pyfunc takes the frames users have: ints, bools, nullable and category dtypes.
    raw = churn_table(50, seed=5, missing=0.2).drop(columns=["churned"])
    typed = raw.astype({"age": "Int64", "is_senior": "boolean", "plan": "category", "region": "category"})
    typed.loc[0, "age"] = pd.NA
    typed.loc[1, "is_senior"] = pd.NA
    model = champion_pyfunc(project)
    for frame in (raw, typed):
        scores = np.asarray(model.predict(frame))
        assert scores.shape == (50,) and np.isfinite(scores).all()
    from mlflow.pyfunc.scoring_server import infer_and_parse_data  # what `mlflow models serve` does
    request = {"dataframe_split": {"columns": ["age", "tenure", "monthly_charges", "is_senior", "plan", "region"],
                                   "data": [[30, 5, None, True, None, "north"], [61, 40, 80.1, False, "pro", "west"]]}}
    parsed = infer_and_parse_data(request, model.metadata.get_input_schema())
    assert np.isfinite(np.asarray(model.predict(parsed))).all()


def _wait_healthy(url: str, proc: subprocess.Popen, cwd: Path) -> None:
    wait_answering(url + "/healthz", proc, lambda: (cwd / "serve.log").read_text()[-3000:], 90, name="serve")


@pytest.mark.parametrize("change, message", [
    (lambda d: d.assign(notes="called twice"), "column(s) notes not in the model's features"),
    (lambda d: d.assign(age=d["age"].astype(object).where(d.index != 7, "unknown")),
     "numeric feature 'age' has 1 non-numeric or infinite value(s) (first at row 7: 'unknown'); did its type change?"),
    (lambda d: d.assign(tenure=np.nan), "feature column(s) tenure have no values (all missing)"),
])
def test_data_that_does_not_fit_the_schema_is_one_clear_line(project: Path, change, message):
    driftloop(project, "init", "--data", "churn.csv", "--target", "churned", "--id", "customer_id")
    change(pd.read_csv(project / "churn.csv")).to_csv(project / "bad.csv", index=False)
    line = error_line(driftloop(project, "train", "--data", "bad.csv", "--epochs", "1", "-q", ok=False))
    assert message in line


def test_init_explains_what_it_cannot_use(project: Path):
    # A date with few distinct days would pass as a category and drift for ever on new days.
    days = pd.date_range("2026-01-01", periods=30).strftime("%Y-%m-%d")
    data = pd.read_csv(project / "churn.csv").assign(empty=np.nan, comment=[f"text {i}" for i in range(1500)],
                                                     signup=[days[i % 30] for i in range(1500)])
    data.to_csv(project / "wide.csv", index=False)
    line = error_line(driftloop(project, "init", "--data", "wide.csv", "--target", "churned", "--id", "customer_id",
                                ok=False))
    assert "empty" not in line  # left out, not refused (below)
    assert "column 'comment' is text with a different value on every sampled row" in line
    assert "column 'signup' holds dates or times: not a feature as it is" in line and "--ignore signup" in line
    driftloop(project, "init", "--data", "wide.csv", "--target", "churned", "--id", "customer_id",
              "--ignore", "empty", "--ignore", "comment", "--ignore", "signup", "--name", "wide", "-o", "wide.yaml")
    assert "ignore: [empty, comment, signup]" in (project / "wide.yaml").read_text()
    assert "exists; pass --force" in error_line(driftloop(project, "init", "--data", "wide.csv", "--target",
                                                          "churned", "-o", "wide.yaml", ok=False))


def test_init_leaves_out_constant_and_empty_columns_and_says_so(project: Path):
    """A constant or all-missing column carries no signal, and drift on it would mean nothing: init
    leaves it out of the features, says so, and lists it under ignore with the reason; train on the
    same file then accepts it. A column with one value besides missing ones is kept (missingness varies)."""
    import yaml
    data = pd.read_csv(project / "churn.csv").assign(
        country="FR", version=3, empty=np.nan, sparse=[1.0 if i % 3 else np.nan for i in range(1500)])
    data.to_csv(project / "flat.csv", index=False)
    proc = driftloop(project, "init", "--data", "flat.csv", "--target", "churned", "--id", "customer_id",
                     "-o", "flat.yaml")
    assert "Left out column 'country': constant: 'FR' on every row" in proc.stderr
    assert "Left out column 'version': constant: 3 on every row" in proc.stderr
    assert "Left out column 'empty': no values (all missing)" in proc.stderr
    text = (project / "flat.yaml").read_text()
    assert "#   country: left out by init, constant: 'FR' on every row" in text
    assert "#   empty: left out by init, no values (all missing)" in text
    model = yaml.safe_load(text)["model"]
    assert model["ignore"] == ["country", "version", "empty"]
    names = [f["name"] for f in model["features"]]
    assert "sparse" in names and not {"country", "version", "empty"} & set(names)
    driftloop(project, "--config", "flat.yaml", "train", "--data", "flat.csv", "--epochs", "1", "-q")
    # Without a config, train infers the same and says what it left out.
    other = project / "noconf"
    other.mkdir()
    data.to_csv(other / "flat.csv", index=False)
    proc = driftloop(other, "train", "--data", "flat.csv", "--target", "churned", "--id", "customer_id",
                     "--epochs", "1", "-q")
    assert "left out country: constant: 'FR' on every row" in proc.stderr


@pytest.mark.slow
def test_train_without_a_config_then_serve_follows_the_champion(project: Path):
    """No driftloop.yaml at all: train infers and records the schema, and the record id by the rule
    of `driftloop init` (a text column with a different value on every row); serve adopts it, target
    and id names included. A config that disagrees with the champion is refused in one line."""
    trained = driftloop(project, "train", "--data", "churn.csv", "--target", "churned", "--epochs", "2")
    assert "Using column 'customer_id' as the record id" in trained.stderr, trained.stderr
    port = free_port()
    log = open(project / "serve.log", "wb")
    serve = subprocess.Popen([*DRIFTLOOP, "serve", "--port", str(port), "--no-gpu"], cwd=project, env=_env(),
                             stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_healthy(f"http://127.0.0.1:{port}", serve, project)
        schema = httpx.get(f"http://127.0.0.1:{port}/v1/schema").json()
    finally:
        serve.terminate()
        serve.wait(30)
    assert (schema["model"], schema["target"], schema["id"]) == ("demo", "churned", "customer_id")
    assert {f["name"]: f["type"] for f in schema["features"]} == {
        "age": "numeric", "tenure": "numeric", "monthly_charges": "numeric", "is_senior": "numeric",
        "plan": "categorical", "region": "categorical"}
    (project / "driftloop.yaml").write_text(
        "model:\n  target: churned\n  id: customer_id\n  features:\n"
        + "".join(f"    - {{name: {f['name']}, type: {'numeric' if f['name'] == 'plan' else f['type']}}}\n"
                  for f in schema["features"] if f["name"] != "region"))
    line = error_line(driftloop(project, "check", ok=False))
    assert line == ("Error: model.features do not match champion v1 of 'driftloop-demo': in the model but not "
                    "configured: region; type changed: plan (categorical -> numeric); make model.features match "
                    "the model (or train a new one with `driftloop train`)")
