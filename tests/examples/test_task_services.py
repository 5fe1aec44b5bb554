"""examples/multiclass_service and examples/regression_service against the real daemon API and a
real MLflow registry: each scores with the champion (a registered pyfunc), sends the features
joined with the model's output as they are, and its predictions and outcomes land in the store;
after a promotion the next rows carry the new version."""
from __future__ import annotations

import httpx
import numpy as np
import pandas as pd
import pytest

from examples.multiclass_service.app import create_app as multiclass_app
from examples.regression_service.app import create_app as regression_app
from monitor.client import Champion, DriftloopClient
from monitor.dataschema import infer_features
from monitor.ingest.app import create_app as create_ingest_app
from monitor.store import PredictionStore
from monitor.tasks import internal_proba_column
from tests.monitor.ingest.conftest import serve
from tests.trainer.conftest import make_config
from tests.trainer.task_data import CLASSES, multiclass_rows, regression_rows

TASKS = {
    "multiclass": (multiclass_app, "species", lambda n, seed: multiclass_rows(n, seed, names=True)),
    "regression": (regression_app, "price", regression_rows),
}


def rows_of(task: str, n: int, seed: int) -> pd.DataFrame:
    _, target, make = TASKS[task]
    data = make(n, seed).rename(columns={"label": target})
    data.insert(0, "request_id", [f"s{seed}-{i}" for i in range(n)])
    return data


@pytest.fixture(params=list(TASKS))
def setup(request, tmp_path, mlflow_template):
    task = request.param
    _, target, _ = TASKS[task]
    data = rows_of(task, 1200, seed=0)
    features = [f.spec().model_dump() for f in infer_features(data, target, id="request_id")]
    model = {"name": task[:5], "task": task, "target": target, "id": "request_id", "features": features,
             **({"classes": CLASSES} if task == "multiclass" else {})}
    cfg = make_config(tmp_path / "home", mlflow_template, model=model)
    from trainer import train_baseline
    train_baseline(cfg, data)  # v1, champion
    store = PredictionStore.from_config(cfg)
    yield task, cfg, store
    store.close()


def test_service_sends_the_models_output_as_it_is(setup):
    from trainer import registry as reg
    from trainer import train_baseline
    task, cfg, store = setup
    create_app, target, _ = TASKS[task]
    live = rows_of(task, 6, seed=9)
    body = [{k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in r.items()}
            for r in live.drop(columns=[target]).astype(object).to_dict("records")]
    body[0]["x1"] = None  # a missing value goes in as it came
    with serve(create_ingest_app(cfg, store)) as url, DriftloopClient(url) as dl, \
            Champion(cfg.tracking_uri, cfg.registered_model_name, interval=0) as champion, \
            serve(create_app(champion, dl)) as service_url, httpx.Client(base_url=service_url, timeout=60) as service:
        answer = service.post("/predict", json=body)
        assert answer.status_code == 200, answer.text
        predictions = answer.json()["predictions"]
        assert answer.json()["model_version"] == "1" and len(predictions) == 6
        outcomes = [{"request_id": r["request_id"], target: r[target]} for r in live.to_dict("records")]
        assert service.post("/outcomes", json=outcomes).json() == {"stored": 6, "duplicates": 0}

        window = store.window()
        assert window["id"].tolist() == live["request_id"].tolist() and np.isnan(window["x1"].iloc[0])
        assert window[target].notna().all()
        if task == "multiclass":
            assert all(p["class"] in CLASSES for p in predictions)
            assert all(abs(sum(p["probabilities"].values()) - 1) < 1e-6 for p in predictions)
            assert window["prediction"].tolist() == [CLASSES.index(p["class"]) for p in predictions]
            assert window[internal_proba_column(1)].tolist() == pytest.approx(
                [p["probabilities"][CLASSES[1]] for p in predictions])
            assert window[target].tolist() == [CLASSES.index(c) for c in live[target]]
        else:
            assert window["prediction"].tolist() == pytest.approx([p["prediction"] for p in predictions])
            assert 50 < float(np.mean(window["prediction"])) < 150   # in the target's units, not standardised
            assert window[target].tolist() == pytest.approx(live[target].tolist())

        train_baseline(cfg, rows_of(task, 1200, seed=3))  # v2
        with reg.session(cfg):
            reg.Registry(cfg).make_champion("2")
        assert champion.refresh() is True
        more = [{**r, "request_id": r["request_id"] + "-b"} for r in body]
        assert service.post("/predict", json=more).json()["model_version"] == "2"
        assert store.window()["model_version"].tolist() == ["1"] * 6 + ["2"] * 6
