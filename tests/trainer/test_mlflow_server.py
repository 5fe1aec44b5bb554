"""The whole train -> retrain -> load -> rollback cycle against a real `mlflow server` over HTTP."""
import io
import json
from types import SimpleNamespace

import httpx
import mlflow
import pandas as pd
import pytest
from mlflow import MlflowClient

from monitor.errors import RegistryError
from tests.support.mlflow_server import start_mlflow_server
from tests.trainer.conftest import make_config
from trainer import load_champion, retrain, rollback, run_data, train_baseline
from trainer.registry import ChampionCache
from trainer.synthetic import make_dataset


@pytest.fixture
def server(tmp_path):
    srv = start_mlflow_server(tmp_path / "mlflow-server")
    yield srv
    srv.stop()


def test_against_a_tracking_server(tmp_path, server, monkeypatch):
    cfg = make_config(tmp_path / "home", mlflow={"tracking_uri": server.url})
    baseline = train_baseline(cfg, make_dataset(1500, seed=1))
    assert baseline.version == "1" and baseline.champion
    out = retrain(cfg, make_dataset(1200, seed=21, concept_shift=1.0), trigger="alert", incident_id="inc-9")
    assert out.outcome == "promoted", out.reasons
    # The window's rows are exported with the run (trainer/run_data.py). This server writes artifacts
    # to a folder the client reaches, so their source is that file; behind a server that proxies
    # them (mlflow-artifacts:/) it is the server's download link, which gives the rows back.
    [holdout] = [d.dataset for d in MlflowClient(tracking_uri=server.url).get_run(out.run_id).inputs.dataset_inputs
                 if d.dataset.name.endswith("gate holdout")]
    assert holdout.source_type == "local" and json.loads(holdout.source)["uri"].endswith("/datasets/holdout.parquet")
    monkeypatch.setattr(mlflow, "get_artifact_uri", lambda path: f"mlflow-artifacts:/1/{out.run_id}/artifacts/{path}")
    monkeypatch.setattr(mlflow, "active_run", lambda: SimpleNamespace(info=SimpleNamespace(run_id=out.run_id)))
    link = run_data._artifact_source(cfg, "datasets/holdout.parquet")
    assert link is not None and link._get_source_type() == "http"
    assert len(pd.read_parquet(io.BytesIO(httpx.get(link.url, timeout=30).content))) == 360
    monkeypatch.undo()
    champion = load_champion(cfg, cache=ChampionCache())
    assert champion.version == "2" and len(champion.baseline.reference) > 0
    assert rollback(cfg) == ("2", "1")
    assert not (tmp_path / "home" / "mlflow.db").exists(), "nothing may fall back to a local store"

    server.stop()  # the daemon's retrain must fail fast and clearly when the server goes away
    with pytest.raises(RegistryError, match="unreachable"):
        retrain(cfg, make_dataset(400, seed=3))
