"""Trainer fixtures: a real MLflow SQLite store per test (copied from one migrated template, since
creating MLflow's schema takes seconds), small fast training settings, and a trained champion."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from monitor.config import DriftloopConfig, load_config
from trainer.synthetic import make_dataset

FAST_TRAINING = {
    "epochs": 25, "retrain_epochs": 15, "min_rows": 100, "progress": False, "reference_sample": 1000,
    "checkpoint_every_minutes": 60.0, "hidden": [32, 16], "threads": 1,
}


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny models train fastest on one thread, and CI shares two cores: more threads only spin."""
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def mlflow_template(tmp_path_factory) -> Path:
    """An empty, fully migrated MLflow database, made once per session."""
    from mlflow import MlflowClient
    db = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    client = MlflowClient(tracking_uri=f"sqlite:///{db}", registry_uri=f"sqlite:///{db}")
    client.search_experiments()
    client.search_registered_models()
    return db


def make_config(home: Path, template: Path | None = None, **sections) -> DriftloopConfig:
    home.mkdir(parents=True, exist_ok=True)
    if template is not None:
        shutil.copy(template, home / "mlflow.db")
    overrides = {"home": str(home), "training": {**FAST_TRAINING, **sections.pop("training", {})}, **sections}
    return load_config(path=None, environ={}, overrides=overrides)


@pytest.fixture
def tcfg(tmp_path, mlflow_template) -> DriftloopConfig:
    """Config with an embedded MLflow store in a fresh home and fast training settings."""
    return make_config(tmp_path / "home", mlflow_template)


@pytest.fixture
def home(tmp_path, mlflow_template, monkeypatch):
    """A driftloop home with a migrated MLflow store, the working directory, and fast training
    settings in the environment: for the CLI commands (`main([...])`) run in-process."""
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(mlflow_template, home / "mlflow.db")
    monkeypatch.chdir(tmp_path)
    for key, value in {"HOME": str(home), "TRAINING__EPOCHS": "20", "TRAINING__RETRAIN_EPOCHS": "15",
                       "TRAINING__MIN_ROWS": "100", "TRAINING__THREADS": "1", "TRAINING__HIDDEN": "[32, 16]"}.items():
        monkeypatch.setenv(f"DRIFTLOOP_{key}", value)
    return home


@pytest.fixture
def champion(tcfg):
    """A baseline trained on 2000 undrifted rows and registered as champion (v1)."""
    from trainer import train_baseline
    return train_baseline(tcfg, make_dataset(2000, seed=1))
