"""The commands on a deployment of two models, end to end: ``init`` writes churn's file and adds
price to it, ``train --model`` trains each (binary, regression) on its own file, and ``check``,
``retrain``, ``rollback``, ``export`` and ``status --model NAME`` act on the model they name and no
other. ``status`` alone lists the models one line each, from the store and the registry or from a
running daemon (``--url``). Real MLflow on SQLite, real PyTorch on CPU, real Evidently."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from monitor.cli import main
from monitor.config import load_config
from tests.support.services import free_port, wait_answering
from tests.trainer.conftest import mlflow_template  # noqa: F401  (fixture)
from tests.trainer.task_data import regression_rows
from trainer.synthetic import make_dataset

# Small and fast: the environment is every model's default (the file's models set none of these).
FAST = {"TRAINING__EPOCHS": "8", "TRAINING__RETRAIN_EPOCHS": "6", "TRAINING__MIN_ROWS": "100",
        "TRAINING__THREADS": "1", "TRAINING__HIDDEN": "[32, 16]", "TRAINING__PROGRESS": "false",
        "TRAINING__REFERENCE_SAMPLE": "800", "DRIFT__MIN_LABELS": "200"}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, mlflow_template):  # noqa: F811
    """Two models in one driftloop.yaml, each trained by `driftloop train --model NAME`."""
    import shutil

    root = tmp_path_factory.mktemp("fleet")
    home = root / "home"
    home.mkdir()
    shutil.copy(mlflow_template, home / "mlflow.db")
    make_dataset(1500, seed=1).to_csv(root / "churn.csv", index=False)
    regression_rows(1500, seed=1).to_csv(root / "price.csv", index=False)
    regression_rows(1000, seed=21, shift=True).to_csv(root / "price_recent.csv", index=False)
    config = root / "driftloop.yaml"
    with pytest.MonkeyPatch.context() as mp:
        for name in [k for k in os.environ if k.startswith("DRIFTLOOP_")]:
            mp.delenv(name)
        for key, value in FAST.items():
            mp.setenv(f"DRIFTLOOP_{key}", value)
        mp.chdir(root)
        assert main(["init", "--data", "churn.csv", "--target", "label", "--output", str(config)]) == 0
        config.write_text(config.read_text() + f"home: {home}\n")
        assert main(["--config", str(config), "init", "--data", "price.csv", "--target", "label",
                     "--model", "price"]) == 0
        cfg = load_config(config)
        assert list(cfg.model_configs()) == ["churn", "price"]
        for name in ("churn", "price"):
            assert main(["--config", str(config), "train", "--model", name, "--data", f"{name}.csv", "-q"]) == 0
        yield SimpleNamespace(root=root, config=config, cfg=cfg, home=home)


def driftloop(fleet, *args: str) -> int:
    return main(["--config", str(fleet.config), *args])


def model_cfg(fleet, name: str):
    from monitor.commands._schema import with_champion_schema
    return with_champion_schema(fleet.cfg.for_model(name))


def send_churn(fleet, n: int, seed: int) -> None:
    """What churn's service does: score rows with churn's champion, log them with their labels."""
    import trainer
    from monitor.store import PredictionStore

    cfg = model_cfg(fleet, "churn")
    rows = make_dataset(n, seed=seed)
    champion = trainer.load_champion(cfg)
    rows["score"] = champion.predict_proba(rows)
    rows["id"] = [f"c-{seed}-{i}" for i in range(n)]
    rows["ts"] = pd.Timestamp.now(tz="UTC").timestamp() - 3600 + rows.index * 0.5
    with PredictionStore.from_config(cfg) as store:
        store.add_predictions(rows.drop(columns=["label"]), model_version=champion.version)
        store.add_labels(rows[["id", "label", "ts"]])


def registered(fleet) -> dict[str, tuple[str | None, str | None]]:
    """Each registered model's champion version and its recorded task."""
    from mlflow import MlflowClient
    uri = f"sqlite:///{fleet.home / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    found = {}
    for m in client.search_registered_models():
        version = str(m.aliases.get("champion"))
        found[m.name] = (version, client.get_model_version(m.name, version).tags.get("driftloop.task"))
    return found


def test_each_command_acts_on_the_model_it_names(fleet, capsys, tmp_path):
    assert registered(fleet) == {"driftloop-churn": ("1", "binary"), "driftloop-price": ("1", "regression")}
    capsys.readouterr()

    for argv in (["check"], ["retrain", "--data", "price_recent.csv"], ["rollback"], ["export", "--out", "x"]):
        assert driftloop(fleet, *argv) == 2, argv
        err = capsys.readouterr().err
        assert "--model NAME" in err and "churn, price" in err, err
    assert driftloop(fleet, "check", "--model", "nope") == 2
    assert "no model 'nope'" in capsys.readouterr().err

    send_churn(fleet, 600, seed=5)
    assert driftloop(fleet, "check", "--model", "churn", "--json", "--no-report") == 0
    churn = json.loads(capsys.readouterr().out)
    assert (churn["status"], churn["champion_version"], churn["window_rows"]) == ("ok", "1", 600)
    assert churn["result"]["task"] == "binary"
    assert driftloop(fleet, "--model", "price", "check", "--json", "--no-report") == 0  # --model before it too
    price = json.loads(capsys.readouterr().out)
    assert (price["status"], price["champion_version"]) == ("empty", "1")  # churn's rows are not price's

    assert driftloop(fleet, "retrain", "--model", "price", "--data", str(fleet.root / "price_recent.csv"),
                     "--json") == 0
    outcome = json.loads(capsys.readouterr().out)
    assert (outcome["outcome"], outcome["champion_version"]) == ("promoted", "2"), outcome["reasons"]
    assert "challenger_mae" in outcome["metrics"]
    assert registered(fleet) == {"driftloop-churn": ("1", "binary"), "driftloop-price": ("2", "regression")}
    assert driftloop(fleet, "status", "--model", "price", "--json") == 0
    assert json.loads(capsys.readouterr().out)["recent_retrains"][0]["status"] == "promoted"
    assert driftloop(fleet, "status", "--model", "churn", "--json") == 0
    assert json.loads(capsys.readouterr().out)["recent_retrains"] == []

    assert driftloop(fleet, "rollback", "--model", "price") == 0
    assert capsys.readouterr().out.strip() == "Champion of driftloop-price: v2 -> v1"
    assert registered(fleet)["driftloop-price"] == ("1", "regression")

    assert driftloop(fleet, "export", "--model", "churn", "--out", str(tmp_path / "churn")) == 0
    manifest = json.loads((tmp_path / "churn" / "manifest.json").read_text())
    assert (manifest["registered_model"], str(manifest["version"]), manifest["task"]) == \
        ("driftloop-churn", "1", "binary")


def test_status_lists_the_models_one_line_each(fleet, capsys):
    from monitor.daemon.runtime.checks import CheckJob
    from monitor.daemon.runtime.wiring import default_champion
    from monitor.daemon.state.attempts import AttemptStore
    from monitor.daemon.state.checklog import CheckLog
    from monitor.daemon.state.incidents import IncidentStore
    from monitor.drift import evaluate_window
    from monitor.store import PredictionStore
    import time

    churn = model_cfg(fleet, "churn")
    send_churn(fleet, 400, seed=7)
    with PredictionStore.from_config(churn) as store:  # a check of churn's, recorded as the daemon records it
        outcome = CheckJob(churn, store, default_champion(churn), evaluate_window, lambda r, ts: (None, None)).run()
        CheckLog(store.engine, "churn", time.time).record(outcome, verdict="healthy")
        # price: an incident open and a retrain running
        incident = IncidentStore(store.engine, "price", time.time).open("mae", "alert", "MAE rose", retrain=False)
        attempts = AttemptStore(store.engine, "price", time.time)
        attempt = attempts.begin(incident.id, "alert")
    try:
        assert driftloop(fleet, "status", "--json") == 0
        listing = json.loads(capsys.readouterr().out)
        assert [(e["name"], e["task"], e["champion"]) for e in listing] == [("churn", "binary", "1"),
                                                                            ("price", "regression", "1")]
        churn_entry, price_entry = listing
        assert churn_entry["last_check"]["state"] == "ok" and churn_entry["last_check"]["at"].endswith("Z")
        assert (churn_entry["incident"], churn_entry["retraining"]) == (None, False)
        assert price_entry["last_check"] is None
        assert price_entry["incident"] == {"id": incident.id, "state": "firing", "reason": "mae"}
        assert price_entry["retraining"] is True

        assert driftloop(fleet, "status") == 0
        lines = capsys.readouterr().out.strip().splitlines()
        assert len(lines) == 3  # a header, then one line per model
        assert lines[1].split()[:4] == ["churn", "binary", "v1", "ok"]
        assert lines[2].split()[:4] == ["price", "regression", "v1", "never"]
        assert incident.id in lines[2] and "mae" in lines[2]

        # --model NAME: that model's whole status, as for a deployment of one
        assert driftloop(fleet, "status", "--model", "price", "--json") == 0
        price = json.loads(capsys.readouterr().out)
        assert price["model"] == "price" and price["retrain_running"]["id"] == attempt.id
        assert [i["id"] for i in price["open_incidents"]] == [incident.id]
        assert driftloop(fleet, "--model", "price", "status") == 0
        assert capsys.readouterr().out.startswith("model        price\n")
        # an incident is found whichever model it is of
        assert driftloop(fleet, "status", "--incident", incident.id, "--json") == 0
        assert json.loads(capsys.readouterr().out)["incident"]["model"] == "price"
        assert driftloop(fleet, "status", "--model", "churn", "--incident", incident.id) == 2  # not churn's
        assert f"no incident {incident.id!r} for model 'churn'" in capsys.readouterr().err
    finally:
        with PredictionStore.from_config(fleet.cfg.for_model("price")) as store:
            AttemptStore(store.engine, "price", time.time).finish(attempt.id, "failed", reasons=["test over"])
            IncidentStore(store.engine, "price", time.time).transition(incident.id, "resolved", "test over")


def test_status_asks_a_running_daemon_for_its_models(fleet, capsys):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRIFTLOOP_")}
    env.update({f"DRIFTLOOP_{k}": v for k, v in FAST.items()})
    env.update({"DRIFTLOOP_SERVER__PORT": str(port), "DRIFTLOOP_DRIFT__INTERVAL_SECONDS": "3600",
                "DRIFTLOOP_SERVER__GPU_METRICS": "false", "PYTHONPATH": str(Path(__file__).resolve().parents[3])})
    log = fleet.root / "serve.log"
    proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "--config", str(fleet.config), "serve"],
                            cwd=fleet.root, env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_answering(f"{url}/healthz", proc, log.read_text, 90, name="serve")
        assert driftloop(fleet, "status", "--url", url, "--json") == 0
        listing = json.loads(capsys.readouterr().out)
        assert [(e["name"], e["task"]) for e in listing] == [("churn", "binary"), ("price", "regression")]
        assert driftloop(fleet, "status", "--url", url) == 0
        assert [line.split()[0] for line in capsys.readouterr().out.strip().splitlines()] == \
            ["MODEL", "churn", "price"]
        assert driftloop(fleet, "status", "--url", url, "--model", "price", "--json") == 0
        assert json.loads(capsys.readouterr().out)["model"] == "price"
    finally:
        proc.terminate()
        proc.wait(30)
