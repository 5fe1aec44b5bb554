"""The datasets a run logs can be loaded again (trainer/run_data.py): a file's absolute path, the
rows exported as Parquet with the run, or, over the bound, the store query that reads them. A real
MLflow SQLite store."""
from __future__ import annotations

import json
from urllib.parse import urlparse

import pandas as pd
from mlflow import MlflowClient

from trainer import retrain, run_data, train_baseline
from trainer.synthetic import make_dataset

WINDOW = {"rows": 1200, "start": "2026-11-30T00:00:00+00:00", "end": "2026-11-30T06:00:00+00:00",
          "since_change": None, "reason": "accuracy"}


def datasets(cfg, run_id: str) -> dict[str, tuple[str, dict]]:
    """context → (source type, source) of the run's dataset inputs."""
    run = MlflowClient(tracking_uri=cfg.tracking_uri).get_run(run_id)
    return {[t.value for t in d.tags if t.key == "mlflow.data.context"][0]:
            (d.dataset.source_type, json.loads(d.dataset.source)) for d in run.inputs.dataset_inputs}


def reloaded(source: dict) -> pd.DataFrame:
    uri = source["uri"]
    return pd.read_parquet(urlparse(uri).path if uri.startswith("file:") else uri)


def test_in_process_and_store_rows_are_exported_with_the_run(tcfg, champion):
    base = datasets(tcfg, champion.run_id)
    assert {c: kind for c, (kind, _) in base.items()} == {"training": "local", "holdout": "local"}
    assert base["holdout"][1]["uri"].endswith("/datasets/holdout.parquet")
    assert len(reloaded(base["training"][1])) + len(reloaded(base["holdout"][1])) == 2000

    window = make_dataset(1200, seed=21, concept_shift=1.0)
    out = retrain(tcfg, window, trigger="alert", incident_id="inc-1", data_window=WINDOW)
    found = datasets(tcfg, out.run_id)
    assert {kind for kind, _ in found.values()} == {"local"}
    training, holdout = reloaded(found["training"][1]), reloaded(found["holdout"][1])
    assert len(training) + len(holdout) == 1200
    assert set(holdout["label"]) <= {0, 1} and tcfg.model.feature_names[0] in holdout.columns


def test_a_window_over_the_bound_is_named_by_its_query(tcfg, champion, monkeypatch):
    monkeypatch.setattr(run_data, "DATASET_MAX_BYTES", 1000)
    out = retrain(tcfg, make_dataset(1200, seed=22, concept_shift=1.0), trigger="alert", data_window=WINDOW)
    found = datasets(tcfg, out.run_id)
    assert {kind for kind, _ in found.values()} == {"external"}
    url = found["training"][1]["url"]
    assert url == (f"driftloop://{tcfg.model.name}/window?labelled=true&start=2026-11-30T00:00:00+00:00"
                   "&end=2026-11-30T06:00:00+00:00&rows=1200")
    run = MlflowClient(tracking_uri=tcfg.tracking_uri).get_run(out.run_id)
    assert not any(a.path == "datasets" for a in MlflowClient(tracking_uri=tcfg.tracking_uri).list_artifacts(
        run.info.run_id))


def test_a_file_is_named_by_its_absolute_path(tcfg, tmp_path, monkeypatch):
    data = make_dataset(1200, seed=1)
    data.to_csv(tmp_path / "rows.csv", index=False)
    monkeypatch.chdir(tmp_path)
    out = train_baseline(tcfg, data, data_source="rows.csv")
    found = datasets(tcfg, out.run_id)
    absolute = str((tmp_path / "rows.csv").resolve())
    assert {c: s for c, (_, s) in found.items()} == {"training": {"uri": absolute}, "holdout": {"uri": absolute}}
    assert run_data.sources(tcfg, {"training": data}, data_window={"source": "file", "path": "rows.csv"}) == \
        {"training": absolute}
