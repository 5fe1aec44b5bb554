"""Issue 33's measure from outside, in one process: a binary classifier and a regressor in one
``models:`` file, each trained for itself, served by one daemon; traffic to both through
``/v1/models/{name}/…``; both judged; ``/metrics`` carries both; drifting one opens an incident and a
retrain (the real worker, real PyTorch and MLflow) for that model alone, while the other, whose
MLflow model is broken meanwhile, fails its own checks without holding anyone up."""
from __future__ import annotations

import subprocess
import threading

import httpx
import pandas as pd
import pytest

from monitor.client import DriftloopClient
from monitor.daemon.runtime.views import iso
from monitor.config import load_config
from tests.conftest import free_port
from tests.monitor.daemon.conftest import SMALL, merge
from tests.monitor.drift.task_frames import FEATURES, regression_frame
from tests.support.prometheus import require
from tests.support.waiting import wait_until


def fleet_config(home, port: int):
    return load_config(path=None, environ={}, overrides=merge(SMALL, {
        "home": str(home), "server": {"port": port},
        "drift": {"window_size": 1500, "min_labels": 300},
        "models": {"churn": {"model": {"task": "binary"}},
                   "price": {"model": {"task": "regression", "features": FEATURES}}}}))


def churn_rows(cfg, n: int, seed: int, concept: float = 0.0) -> pd.DataFrame:
    import trainer
    from trainer.synthetic import make_dataset
    df = make_dataset(n, seed=seed, concept_shift=concept)
    df["score"] = trainer.load_champion(cfg).predict_proba(df)
    df["id"] = [f"c-{seed}-{i}" for i in range(n)]
    return df


def price_rows(n: int, seed: int) -> pd.DataFrame:
    df = regression_frame(n, seed=seed)
    df["id"] = [f"p-{seed}-{i}" for i in range(n)]
    return df.drop(columns=["score"])


@pytest.fixture(scope="module")
def trained_home(tmp_path_factory):
    """Both models trained with their own configuration (what `driftloop train --model` does)."""
    import trainer
    from trainer.synthetic import make_dataset
    home = tmp_path_factory.mktemp("fleet-home")
    cfg = fleet_config(home, 8470)
    trainer.train_baseline(cfg.for_model("churn"), make_dataset(3000, seed=1))
    trainer.train_baseline(cfg.for_model("price"), regression_frame(3000, seed=1, window=False))
    return home


def test_one_daemon_judges_two_models_and_retrains_only_the_one_that_drifted(trained_home, tmp_path):
    import shutil

    from mlflow import MlflowClient

    from monitor.daemon.runtime.fleet import Fleet
    from monitor.daemon.runtime.serve import serve

    home = tmp_path / "home"
    shutil.copytree(trained_home, home)
    cfg = fleet_config(home, free_port())
    churn_cfg, price_cfg = cfg.for_model("churn"), cfg.for_model("price")
    fleet = Fleet(cfg)
    stop, ready = threading.Event(), threading.Event()
    thread = threading.Thread(target=serve, args=(cfg, stop), kwargs={"fleet": fleet, "ready": ready,
                                                                       "scheduler": False}, daemon=True)
    thread.start()
    try:
        assert ready.wait(60)
        url = f"http://127.0.0.1:{cfg.server.port}"
        churn, price = DriftloopClient(url, model="churn"), DriftloopClient(url, model="price")
        stationary = churn_rows(churn_cfg, 1500, seed=11)
        churn.log_predictions(stationary.drop(columns=["label"]))
        churn.log_labels(stationary[["id", "label"]])
        values = price_rows(1500, seed=12)
        price.log_predictions(values.drop(columns=["label"]))
        price.log_labels(values[["id", "label"]])
        # Each model's rows are in its own tables, nowhere else.
        assert fleet.daemons["churn"].store.row_counts()["predictions"] == 1500
        assert fleet.daemons["price"].store.row_counts()["predictions"] == 1500

        reports = {name: fleet.daemons[name].run_check_now() for name in ("churn", "price")}
        assert {n: r.outcome.status for n, r in reports.items()} == {"churn": "ok", "price": "ok"}
        assert reports["price"].outcome.result.mae is not None and reports["churn"].outcome.result.accuracy > 0.7
        listing = httpx.get(url + "/v1/models", timeout=10).json()
        assert [(m["name"], m["task"], m["champion"], m["last_check"]["state"]) for m in listing["models"]] == \
            [("churn", "binary", "1", "ok"), ("price", "regression", "1", "ok")]
        # Times as /status writes them (it was epoch seconds here, ISO 8601 in /status).
        at = listing["models"][0]["last_check"]["at"]
        assert at == iso(reports["churn"].outcome.ts) and at.endswith("Z")

        metrics = httpx.get(url + "/metrics", timeout=10).text
        for model in ("churn", "price"):
            assert f'driftloop_model_check_state{{model="{model}",state="ok"}} 1.0' in metrics
            assert f'driftloop_daemon_leader{{model="{model}"}} 1.0' in metrics
        assert "driftloop_fleet_models{state=\"running\"} 2.0" in metrics
        lint = subprocess.run([require("promtool"), "check", "metrics"], input=metrics.encode(), capture_output=True)
        assert lint.returncode == 0, lint.stdout.decode() + lint.stderr.decode()

        # Break price's MLflow model: its champion alias now names a version that cannot be loaded.
        client = MlflowClient(tracking_uri=price_cfg.tracking_uri)
        broken = client.create_model_version(price_cfg.registered_model_name, source=str(tmp_path / "nothing"))
        client.set_registered_model_alias(price_cfg.registered_model_name, "champion", broken.version)

        churn_ctl, price_ctl = fleet.daemons["churn"].controller, fleet.daemons["price"].controller
        # Churn's concept changes; each check sees more of it until its incident retrains.
        for seed in range(20, 26):
            drifted = churn_rows(churn_cfg, 800, seed=seed, concept=0.8)
            churn.log_predictions(drifted.drop(columns=["label"]))
            churn.log_labels(drifted[["id", "label"]])
            fleet.daemons["price"].run_check_now()
            fleet.daemons["churn"].run_check_now()
            if churn_ctl.attempts.recent(1):
                break
        incident = churn_ctl.incidents.current()
        assert incident is not None and incident.reason == "accuracy", incident
        wait_until(lambda: churn_ctl.attempts.for_incident(incident.id), 120, 0.5, "churn never retrained")
        assert fleet.daemons["churn"].wait_for_retrain(600)
        attempt = churn_ctl.attempts.for_incident(incident.id)[-1]
        assert attempt.status in ("promoted", "rejected"), attempt
        # Price: judged all along, its failures its own; no incident, no retrain.
        assert price_ctl.incidents.current() is None and price_ctl.attempts.running() is None
        assert price_ctl.last_check.outcome.status == "error"
        assert price_ctl.checklog.error_total() >= 1
        assert price_ctl.attempts.recent(5) == []
        after = httpx.get(url + "/metrics", timeout=10).text
        assert 'driftloop_model_check_state{model="price",state="error"} 1.0' in after
        assert 'driftloop_retrains_total{model="churn",outcome=' in after
    finally:
        stop.set()
        thread.join(60)
