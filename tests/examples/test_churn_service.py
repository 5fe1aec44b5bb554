"""examples/churn_service against the real daemon API and a real MLflow registry: it scores with the
champion, follows a promotion and a rollback, and its predictions and outcomes land in the store."""
from __future__ import annotations


import httpx
import numpy as np
import pytest

from examples.churn_service.app import create_app
from monitor.client import Champion, ClientError, DriftloopClient
from monitor.dataschema import infer_features
from monitor.ingest.app import create_app as create_ingest_app
from monitor.store import PredictionStore
from tests.monitor.ingest.conftest import serve
from tests.support.churn import churn_table
from tests.support.waiting import wait_until
from tests.trainer.conftest import make_config


@pytest.fixture
def setup(tmp_path, mlflow_template):
    data = churn_table(1200, seed=0)
    features = [f.spec().model_dump() for f in infer_features(data, "churned", id="customer_id")]
    cfg = make_config(tmp_path / "home", mlflow_template,
                      model={"name": "churn", "target": "churned", "id": "customer_id", "features": features})
    from trainer import train_baseline
    train_baseline(cfg, data)  # v1, champion
    store = PredictionStore.from_config(cfg)
    yield cfg, data, store
    store.close()


def test_service_scores_with_the_champion_and_follows_it(setup):
    from trainer import registry as reg
    from trainer import rollback, train_baseline
    cfg, data, store = setup
    rows = churn_table(5, seed=9, missing=0.0).drop(columns=["churned"])
    rows.loc[0, "monthly_charges"] = np.nan
    rows.loc[1, "plan"] = None
    body = [{k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in r.items()}
            for r in rows.astype(object).to_dict("records")]
    with serve(create_ingest_app(cfg, store)) as url, DriftloopClient(url) as dl, \
            Champion(cfg.tracking_uri, cfg.registered_model_name, interval=0) as champion, \
            serve(create_app(champion, dl)) as service_url, httpx.Client(base_url=service_url, timeout=60) as service:
        answer = service.post("/predict", json=body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["model_version"] == "1" and len(answer.json()["scores"]) == 5
        assert service.post("/outcomes", json=[{"customer_id": body[0]["customer_id"], "churned": 1}]).json() == \
            {"stored": 1, "duplicates": 0}
        window = store.window()
        assert len(window) == 5 and np.isnan(window["monthly_charges"].iloc[0]) and window["plan"].iloc[1] is None
        assert window["churned"].notna().sum() == 1

        train_baseline(cfg, churn_table(1200, seed=3))  # v2, not champion yet
        assert champion.refresh() is False and champion.version == "1"
        with reg.session(cfg):
            reg.Registry(cfg).make_champion("2")
        assert champion.refresh() is True and champion.version == "2"
        more = [{**r, "customer_id": r["customer_id"] + "-b"} for r in body]
        assert service.post("/predict", json=more).json()["model_version"] == "2"
        assert store.window()["model_version"].tolist() == ["1"] * 5 + ["2"] * 5

        rollback(cfg)
        assert champion.refresh() is True and champion.version == "1"
        assert service.get("/healthz").json()["model_version"] == "1"


def test_champion_follows_in_the_background_and_names_a_missing_alias(setup):
    from trainer import registry as reg
    from trainer import train_baseline
    cfg, data, _ = setup
    train_baseline(cfg, churn_table(1200, seed=4))  # v2
    with Champion(cfg.tracking_uri, cfg.registered_model_name, interval=0.2) as champion:
        assert champion.version == "1"
        before = champion.predict(data.head(20))
        with reg.session(cfg):
            reg.Registry(cfg).make_champion("2")
        wait_until(lambda: champion.version == "2", 30, 0.1, lambda: f"still v{champion.version}")
        assert champion.last_error is None
        assert not np.allclose(champion.predict(data.head(20)), before)
    with pytest.raises(ClientError, match="has no 'staging' alias"):
        Champion(cfg.tracking_uri, cfg.registered_model_name, alias="staging", interval=0)
