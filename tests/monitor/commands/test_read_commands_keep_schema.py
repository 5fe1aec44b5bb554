"""``status`` and ``export-samples`` only read: run where ``model.features`` (and ``model.task``) are
not configured, they leave the model's tables and its ``driftloop_models`` row as the daemon made them
from the champion's recorded schema. They used to open the store with the configured (here: the
demo's) features, adding f_x0..f_x7, f_region, f_device to the champion's table and rewriting its
features_json, and listed a regression model as failed ("its stored labels are numbers but the model
is a binary model"). Real MLflow on SQLite, real PyTorch on CPU, through the real CLI entry."""
from __future__ import annotations

import json
import logging
import os
import shutil
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

import monitor.daemon.state.tables  # noqa: F401  (registers the daemon's tables with the store)
from monitor.cli import main
from monitor.config import load_config
from monitor.daemon.runtime.checks import CheckOutcome
from monitor.daemon.state.checklog import CheckLog
from monitor.drift.drifted_rows import AtypicalRow, DriftedRows, RowCluster
from monitor.drift.result import CheckResult, FeatureDrift
from monitor.store.engine import make_engine
from monitor.store.migrations import migrate
from tests.trainer.conftest import mlflow_template  # noqa: F401  (fixture)

FAST = {"TRAINING__EPOCHS": "3", "TRAINING__MIN_ROWS": "100", "TRAINING__THREADS": "1",
        "TRAINING__HIDDEN": "[16]", "TRAINING__PROGRESS": "false", "TRAINING__REFERENCE_SAMPLE": "300"}


def _binary_rows(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=n), rng.normal(size=n)
    return pd.DataFrame({"a": a, "b": b, "colour": rng.choice(["red", "blue", "green"], n),
                         "target": (a + b + rng.normal(0, 0.5, n) > 0).astype(int)})


def _price_rows(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    size, rooms = rng.uniform(30, 200, n), rng.integers(1, 6, n).astype(float)
    return pd.DataFrame({"size": size, "rooms": rooms, "label": 50 + 2.0 * size + 10 * rooms + rng.normal(0, 5, n)})


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, mlflow_template):  # noqa: F811
    """Two models without model.features or model.task (nf: binary on a, b, colour; price: regression
    on size, rooms), each trained by `driftloop train` and served one prediction and its label with its
    champion's schema, as `serve` stores them; and one recorded check of nf that lists drifted rows."""
    from monitor.commands._schema import with_champion_schema
    from monitor.store import PredictionStore

    root = tmp_path_factory.mktemp("nofeat")
    home = root / "home"
    home.mkdir()
    shutil.copy(mlflow_template, home / "mlflow.db")
    _binary_rows(400, 1).to_csv(root / "nf.csv", index=False)
    _price_rows(400, 2).to_csv(root / "price.csv", index=False)
    config = root / "driftloop.yaml"
    config.write_text(f"home: {home}\nmodels:\n  nf:\n    model: {{target: target}}\n"
                      "  price:\n    model: {target: label}\n")
    with pytest.MonkeyPatch.context() as mp:
        for name in [k for k in os.environ if k.startswith("DRIFTLOOP_")]:
            mp.delenv(name)
        for key, value in FAST.items():
            mp.setenv(f"DRIFTLOOP_{key}", value)
        mp.chdir(root)
        for name in ("nf", "price"):
            assert main(["--config", str(config), "train", "--model", name, "--data", f"{name}.csv", "-q"]) == 0
        deployment = load_config(config, environ={})
        for name, rows in (("nf", _binary_rows(1, 7)), ("price", _price_rows(1, 8))):
            cfg = with_champion_schema(deployment.for_model(name))  # what serve does
            target = cfg.model.target
            with PredictionStore.from_config(cfg) as store:
                sent = rows.drop(columns=[target]).assign(id=f"{name}-1")
                store.add_predictions(sent.assign(score=0.7) if name == "nf" else sent.assign(prediction=120.0))
                store.add_labels([{"id": f"{name}-1", "label": rows[target].iloc[0].item()}])
        engine = make_engine(deployment.store_url)
        try:
            migrate(engine)
            block = DriftedRows("a", scored_rows=1, reference_rows=300, neighbours=1, threshold=4.0, atypical_rows=1,
                                rows=(AtypicalRow("nf-1", 1_700_000_000.0, 9.0, 0, 0.7, 1, None),),
                                clusters=(RowCluster(0, 1, 9.0, 9.0, ("nf-1",)),))
            result = CheckResult(check_id="0123456789ab", model="nf", checked_at=1_700_000_100.0, window_rows=1,
                                 labelled_rows=1, features=[FeatureDrift("a", "ks", 0.001, 0.05, True)],
                                 drift_share=1.0, drift_share_threshold=0.5, dataset_drift=True,
                                 prediction_drift=FeatureDrift("score", "ks", 0.5, 0.05, False), drifted_rows=[block])
            check = CheckLog(engine, "nf", lambda: 1_700_000_100.0).record(
                CheckOutcome(1_700_000_100.0, "ok", "checked", champion_version="1", result=result, window_rows=1))
        finally:
            engine.dispose()
        yield SimpleNamespace(root=root, config=config, url=deployment.store_url, check=check)


def schema(url: str) -> dict:
    """Every table's columns with their types, and the driftloop_models rows."""
    engine = make_engine(url)
    try:
        inspector = sa.inspect(engine)
        tables = {t: [(c["name"], str(c["type"])) for c in inspector.get_columns(t)]
                  for t in inspector.get_table_names()}
        with engine.connect() as conn:
            models = conn.exec_driver_sql("SELECT * FROM driftloop_models ORDER BY name").all()
        return {"tables": tables, "models": [tuple(r) for r in models]}
    finally:
        engine.dispose()


def test_status_and_export_samples_leave_the_champions_schema_alone(fleet, capsys, caplog, monkeypatch):
    monkeypatch.chdir(fleet.root)
    for name in [k for k in os.environ if k.startswith("DRIFTLOOP_")]:
        monkeypatch.delenv(name)
    before = schema(fleet.url)
    assert [c for c, _ in before["tables"]["predictions_nf"] if c.startswith("f_")] == ["f_a", "f_b", "f_colour"]
    assert [c for c, _ in before["tables"]["predictions_price"] if c.startswith("f_")] == ["f_size", "f_rooms"]
    stored = {row[0]: json.loads(row[3]) for row in before["models"]}
    assert stored == {"nf": {"a": "numeric", "b": "numeric", "colour": "categorical"},
                      "price": {"size": "numeric", "rooms": "numeric"}}
    capsys.readouterr()
    caplog.set_level(logging.INFO)

    def driftloop(*args: str) -> int:
        return main(["--config", str(fleet.config), *args])

    # The listing: both models, each with its own task; none failed.
    assert driftloop("status") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["MODEL", "TASK", "CHAMPION"]
    assert [line.split()[:3] for line in lines[1:]] == [["nf", "binary", "v1"], ["price", "regression", "v1"]]
    assert "failed" not in "\n".join(lines)
    assert driftloop("status", "--json") == 0
    listing = json.loads(capsys.readouterr().out)
    assert [(e["name"], e.get("error"), e["champion"]) for e in listing] == [("nf", None, "1"), ("price", None, "1")]

    # One model's whole status.
    for name in ("nf", "price"):
        assert driftloop("status", "--model", name, "--json") == 0
        status = json.loads(capsys.readouterr().out)
        assert status["champion"]["version"] == "1"
    assert driftloop("status", "--model", "nf", "--json") == 0
    assert json.loads(capsys.readouterr().out)["last_check"]["id"] == fleet.check

    # The rows behind nf's check, written out.
    out = fleet.root / "samples"
    assert driftloop("export-samples", "--model", "nf", "--out", str(out)) == 0
    assert f"1 rows of check {fleet.check}" in capsys.readouterr().out
    assert pd.read_csv(out / "samples.csv")["id"].tolist() == ["nf-1"]

    assert schema(fleet.url) == before  # no column added, no label type questioned, no row rewritten
    assert not [r.getMessage() for r in caplog.records if "added to" in r.getMessage()]
