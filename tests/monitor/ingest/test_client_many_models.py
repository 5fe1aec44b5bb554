"""monitor.client against a real daemon that hosts several models (``models:``), served over HTTP in
this process: each client names its model and its records land in that model's store; and
``Champion.for_model`` finds a monitored model's registered model as the daemon does."""
from __future__ import annotations

import shutil
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import httpx
import numpy as np
import pandas as pd
import pytest
import yaml

from monitor.champion_client import registry_names
from monitor.client import Champion, ClientError, DriftloopClient, RequestRejected
from monitor.config import DriftloopConfig, load_config
from monitor.errors import ConfigError
from monitor.store import PredictionStore
from tests.monitor.daemon.conftest import baseline_home  # noqa: F401  (session fixture: a trained champion)
from tests.monitor.ingest.conftest import TOKEN, free_port

CHURN = {"model": {"task": "binary", "target": "churned",
                   "features": [{"name": "x0"}, {"name": "region", "type": "categorical"}]}}
PRICE = {"model": {"task": "regression", "target": "price", "features": [{"name": "sqft"}, {"name": "rooms"}]},
         "mlflow": {"registered_model": "house-prices"}}


def write_config(home: Path, models: dict | None, **top) -> Path:
    """A driftloop.yaml in ``home``: ``models`` (name -> sections) or, when None, ``top``'s one model."""
    doc = {"home": str(home), "server": {"port": free_port(), "token": TOKEN, "gpu_metrics": False},
           "logging": {"level": "WARNING"}, **top}
    if models is not None:
        doc["models"] = models
    home.mkdir(parents=True, exist_ok=True)
    path = home / "driftloop.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@contextmanager
def running(cfg: DriftloopConfig) -> Iterator[str]:
    """``driftloop serve``'s body on ``cfg`` in a thread (no scheduled checks); yields its URL."""
    from monitor.daemon.runtime.serve import serve

    stop, ready = threading.Event(), threading.Event()
    thread = threading.Thread(target=serve, args=(cfg, stop), kwargs={"ready": ready, "scheduler": False},
                              daemon=True)
    thread.start()
    assert ready.wait(60), "the daemon did not start"
    try:
        yield f"http://127.0.0.1:{cfg.server.port}"
    finally:
        stop.set()
        thread.join(30)


@dataclass
class Deployment:
    cfg: DriftloopConfig
    url: str

    def counts(self, model: str) -> dict[str, int]:
        with PredictionStore.from_config(self.cfg.for_model(model)) as store:
            return store.row_counts()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Iterator[Deployment]:
    """A daemon of two models: ``churn`` (binary, x0 and region) and ``price`` (regression)."""
    cfg = load_config(write_config(tmp_path_factory.mktemp("fleet"), {"churn": CHURN, "price": PRICE}), environ={})
    with running(cfg) as url:
        yield Deployment(cfg, url)


def churn_frame(ids: list[str]) -> pd.DataFrame:
    i = np.arange(len(ids))
    return pd.DataFrame({"id": ids, "x0": i * 0.5, "region": np.where(i % 2, "us", "eu"), "score": (i % 10) / 10,
                         "churned": i % 2})


def price_frame(ids: list[str]) -> pd.DataFrame:
    i = np.arange(len(ids))
    return pd.DataFrame({"id": ids, "sqft": 500.0 + i, "rooms": i % 5, "prediction": 1e5 + i, "price": 1e5 + 2 * i})


def test_each_model_s_records_land_in_its_own_store(fleet):
    ids = [f"own-{i}" for i in range(30)]  # the same ids for both: separate stores, no duplicates
    before = {name: fleet.counts(name) for name in ("churn", "price")}
    with DriftloopClient(fleet.url, TOKEN, model="churn", batch_size=7) as churn, \
            DriftloopClient(fleet.url, TOKEN, model="price") as price:
        assert (churn.schema()["task"], price.schema()["task"]) == ("binary", "regression")
        sent = churn.log_predictions(churn_frame(ids))
        assert (sent.stored, sent.duplicates, sent.batches) == (30, 0, 5)
        assert churn.log_labels(churn_frame(ids)[["id", "churned"]]).stored == 30
        assert price.log_predictions(price_frame(ids[:12])).stored == 12
        assert price.log_labels(price_frame(ids[:12])[["id", "price"]]).stored == 12
        assert churn.status()["model"] == "churn" and price.status()["model"] == "price"
    after = {name: fleet.counts(name) for name in ("churn", "price")}
    assert after["churn"] == {"predictions": before["churn"]["predictions"] + 30,
                              "labels": before["churn"]["labels"] + 30}
    assert after["price"] == {"predictions": before["price"]["predictions"] + 12,
                              "labels": before["price"]["labels"] + 12}
    with PredictionStore.from_config(fleet.cfg.for_model("price")) as store:
        window = store.window().set_index("id").loc[ids[:12]]
    assert np.allclose(window["prediction"], 1e5 + np.arange(12)) and np.allclose(window["price"],
                                                                                    1e5 + 2 * np.arange(12))


def test_a_bad_record_is_refused_for_its_model_naming_the_field(fleet):
    before = fleet.counts("price")
    bad = [{"id": "bad-0", "features": {"sqft": 1.0, "rooms": 2}, "prediction": 3.0},
           {"id": "bad-1", "features": {"sqft": 1.0, "rooms": 2}, "prediction": "high"}]
    with DriftloopClient(fleet.url, TOKEN, model="price") as price:
        with pytest.raises(RequestRejected) as info:
            price.log_predictions(bad)
    assert info.value.status_code == 422
    assert [(e["index"], e["field"]) for e in info.value.errors] == [(1, "prediction")]
    assert "model 'price'" in str(info.value)
    assert fleet.counts("price") == before  # the batch is atomic
    # A churn record is a churn record: a regression prediction is no score.
    with DriftloopClient(fleet.url, TOKEN, model="churn") as churn:
        with pytest.raises(RequestRejected) as info:
            churn.log_predictions([{"id": "bad-2", "features": {"x0": 1.0, "region": "eu"}, "prediction": 3.5}])
    assert info.value.status_code == 422 and "score" in {e["field"] for e in info.value.errors}


def test_an_unknown_model_is_a_404_naming_it(fleet):
    with DriftloopClient(fleet.url, TOKEN, model="nope", retries=0) as nope:
        with pytest.raises(RequestRejected) as records:
            nope.log_predictions([{"id": "n-0", "features": {"x0": 1.0}, "score": 0.5}])
        with pytest.raises(RequestRejected) as frame:
            nope.log_predictions(churn_frame(["n-1"]))  # its schema: not read as some other model's
    for exc in (records.value, frame.value):
        assert exc.status_code == 404 and "'nope'" in str(exc)
        assert "churn" in str(exc) and "price" in str(exc)  # the server's answer lists the models it has


def test_a_client_without_a_model_is_told_to_name_one(fleet):
    with DriftloopClient(fleet.url, TOKEN, retries=0) as anonymous:
        with pytest.raises(RequestRejected) as info:
            anonymous.log_predictions(churn_frame(["a-0"]))
    assert info.value.status_code == 404 and "/v1/models/" in str(info.value)


def test_models_lists_the_daemon_s_models(fleet):
    with DriftloopClient(fleet.url) as dl:
        listed = dl.models()
    assert [(m["name"], m["task"], m["state"], m["url"]) for m in listed] == [
        ("churn", "binary", "running", "/v1/models/churn"), ("price", "regression", "running", "/v1/models/price")]


def test_without_a_model_a_daemon_of_one_answers_as_always(tmp_path):
    path = write_config(tmp_path / "one", None, model={"name": "solo", **CHURN["model"]})
    cfg = load_config(path, environ={})
    with running(cfg) as url:
        with DriftloopClient(url, TOKEN) as plain, DriftloopClient(url, TOKEN, model="solo") as named:
            frame = churn_frame(["p-0", "p-1", "p-2"])
            assert plain.log_predictions(frame[:2]).stored == 2
            assert named.log_predictions(frame[1:]).stored == 1  # the same model: p-1 is a duplicate
            assert [m["name"] for m in plain.models()] == ["solo"]
    with PredictionStore.from_config(cfg) as store:
        assert store.row_counts()["predictions"] == 3


def test_the_model_name_is_quoted_into_the_path():
    paths = []

    def answer(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.raw_path.decode())
        return httpx.Response(200, json={"stored": 1, "duplicates": 0})

    with DriftloopClient("http://x", model="a b/c", transport=httpx.MockTransport(answer)) as dl:
        dl.log_labels([{"id": "1", "label": 1}])
    assert paths == ["/v1/models/a%20b%2Fc/labels"]
    with pytest.raises(ValueError):
        DriftloopClient("http://x", model="")


# ---- Champion.for_model ----------------------------------------------------------------------
@pytest.fixture
def fleet_file(tmp_path) -> Path:
    return write_config(tmp_path / "home", {"churn": CHURN, "price": PRICE})


def test_registry_names_are_the_daemons(fleet_file):
    cfg = load_config(fleet_file, environ={})
    assert registry_names("churn", config=fleet_file) == (cfg.tracking_uri, "driftloop-churn")
    assert registry_names("price", config=cfg) == (cfg.tracking_uri, "house-prices")
    assert registry_names("price", config=fleet_file, tracking_uri="http://mlflow:5000") == (
        "http://mlflow:5000", "house-prices")
    # Without a file, the default the configuration gives a model that does not set mlflow.registered_model.
    assert registry_names("churn", tracking_uri="http://mlflow:5000") == (
        "http://mlflow:5000", cfg.for_model("churn").registered_model_name)
    with pytest.raises(ConfigError):
        registry_names("nope", config=fleet_file)
    with pytest.raises(ValueError):
        registry_names("churn")


def test_reading_a_config_needs_the_full_install(fleet_file, monkeypatch):
    monkeypatch.setitem(sys.modules, "monitor.config", None)  # as in driftloop-client, which lacks it
    with pytest.raises(ClientError) as info:
        registry_names("churn", config=fleet_file)
    assert type(info.value) is ClientError and isinstance(info.value.__cause__, ModuleNotFoundError)


def test_the_light_client_leaves_the_config_loader_out():
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
    try:
        import build_client
    finally:
        sys.path.pop(0)
    modules = build_client.closure()
    assert "monitor.champion_client" in modules and not [m for m in modules if m.startswith("monitor.config")]
    # Only that one function-local import is let through: without the exception the build refuses it.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(build_client, "FULL_INSTALL_ONLY", {})
        with pytest.raises(ValueError, match="monitor.champion_client imports monitor.config"):
            build_client.closure()


def test_champion_for_model_follows_the_models_registered_model(tmp_path, baseline_home):  # noqa: F811
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(baseline_home / "mlflow.db", home / "mlflow.db")  # driftloop-demo, champion v1
    path = write_config(home, {"demo": {}, "price": PRICE})
    with Champion.for_model("demo", config=path, interval=0) as champion:
        assert (champion.name, champion.version) == ("driftloop-demo", "1")
        from trainer.synthetic import make_dataset
        scores = champion.predict(make_dataset(20, seed=3))
    assert len(scores) == 20 and ((scores >= 0) & (scores <= 1)).all()
    with pytest.raises(ClientError) as info:  # price's registered model is house-prices, not in this registry
        Champion.for_model("price", config=path, interval=0)
    assert "house-prices" in str(info.value)
