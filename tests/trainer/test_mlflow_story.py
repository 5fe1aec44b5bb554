"""What a person browsing MLflow sees: the experiment opens on its runs (classic ML), each run and
version describes itself, the training windows are logged datasets, and the champion tag on runs
follows the alias through promotion and rollback. A real MLflow SQLite store throughout."""
from __future__ import annotations

import shutil
import subprocess

import pytest
from mlflow import MlflowClient

from tests.support.mlflow_server import start_mlflow_server

from trainer import retrain, rollback
from trainer.story import CLASSIC_ML, EXPERIMENT_KIND_TAG, NOTE_TAG, experiment_link, run_url, runs_url
from trainer.synthetic import make_dataset


def client(cfg) -> MlflowClient:
    return MlflowClient(tracking_uri=cfg.tracking_uri, registry_uri=cfg.tracking_uri)


def champion_tag(c: MlflowClient, cfg, version: str) -> str | None:
    run_id = c.get_model_version(cfg.registered_model_name, version).run_id
    return c.get_run(run_id).data.tags.get("driftloop.champion")


def test_runs_explain_themselves_and_tags_follow_the_alias(tcfg, champion):
    c = client(tcfg)
    exp = c.get_experiment_by_name(tcfg.experiment_name)
    assert exp.tags[EXPERIMENT_KIND_TAG] == CLASSIC_ML == "custom_model_development"
    assert runs_url("http://127.0.0.1:5000/", exp.experiment_id) == \
        f"http://127.0.0.1:5000/#/experiments/{exp.experiment_id}/runs?workflowType=machine_learning"
    assert experiment_link(tcfg) == runs_url("http://127.0.0.1:5000", exp.experiment_id)

    base = c.get_run(champion.run_id)
    assert base.info.run_name == "first model by hand v1"
    assert "First model v1" in base.data.tags[NOTE_TAG] and "accuracy" in base.data.tags[NOTE_TAG]
    model = c.get_registered_model(tcfg.registered_model_name)
    assert "binary classification" in model.description and f"`{tcfg.model.target}`" in model.description
    assert all(f"`{f}`" in model.description for f in tcfg.model.feature_names)

    window = make_dataset(1500, seed=21, concept_shift=1.0)
    out = retrain(tcfg, window, trigger="alert", incident_id="inc-7",
                  data_window={"rows": 1500, "start": "2026-11-30T00:00:00", "end": "2026-11-30T06:00:00",
                               "since_change": "2026-11-30T02:00:00", "reason": "accuracy"})
    assert out.outcome == "promoted", out.reasons
    run = c.get_run(out.run_id)
    assert run.info.run_name == "retrain after accuracy drop (incident inc-7) v1→v2"
    note = run.data.tags[NOTE_TAG]
    m = out.metrics
    for text in ("alert", "accuracy drop", "inc-7", "change point 2026-11-30T02:00:00", "**promoted**",
                 f"{m['challenger_accuracy']:.4f}", f"{m['champion_accuracy']:.4f}",
                 f"{m['challenger_roc_auc']:.4f}", "#### Export"):
        assert text in note, (text, note)
    assert c.get_model_version(tcfg.registered_model_name, "2").description == note

    inputs = {(d.dataset.name, [t.value for t in d.tags if t.key == "mlflow.data.context"][0])
              for d in run.inputs.dataset_inputs}
    assert inputs == {(f"{tcfg.model.name} recent window", "training"), (f"{tcfg.model.name} gate holdout", "holdout")}
    ds = next(d.dataset for d in run.inputs.dataset_inputs if "holdout" in d.dataset.name)
    assert ds.digest and '"num_rows": 450' in ds.profile and tcfg.model.feature_names[0] in ds.schema
    assert len(c.get_run(champion.run_id).inputs.dataset_inputs) == 2

    # The alias is the truth: the runs' champion tag follows it through promotion and rollback.
    assert (champion_tag(c, tcfg, "1"), champion_tag(c, tcfg, "2")) == ("false", "true")
    assert rollback(tcfg) == ("2", "1")
    assert (champion_tag(c, tcfg, "1"), champion_tag(c, tcfg, "2")) == ("true", "false")


def test_an_existing_experiment_is_marked_classic_ml(tcfg):
    from trainer import registry as reg
    c = client(tcfg)
    exp_id = c.create_experiment(tcfg.experiment_name)
    with reg.session(tcfg):
        assert reg.Registry(tcfg).experiment_id() == exp_id
    assert c.get_experiment(exp_id).tags[EXPERIMENT_KIND_TAG] == CLASSIC_ML


def chromium() -> str | None:
    return next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)


def rendered(browser: str, url: str, tmp_path) -> str:
    """The DOM of ``url`` after MLflow's single-page app has fetched and rendered (headless Chromium)."""
    out = subprocess.run([browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                          f"--user-data-dir={tmp_path / 'chromium'}", "--virtual-time-budget=20000",
                          "--dump-dom", url], capture_output=True, text=True, timeout=120)
    return out.stdout


def test_the_printed_link_lands_on_the_runs_in_a_browser(tcfg, champion, tmp_path):
    """A fresh browser following the link driftloop prints sees the runs in MLflow's model-training
    view (not its GenAI overview) with readable names and datasets; a run page renders its description."""
    browser = chromium()
    if browser is None:
        pytest.skip("chromium is not installed (scripts/setup.sh installs it)")
    out = retrain(tcfg, make_dataset(800, seed=21, concept_shift=1.0), trigger="alert", incident_id="inc-8",
                  data_window={"rows": 800, "reason": "accuracy"})
    workdir = tmp_path / "server"
    workdir.mkdir()
    shutil.copy(tcfg.tracking_uri[len("sqlite:///"):], workdir / "mlflow.db")
    server = start_mlflow_server(workdir)
    try:
        link = experiment_link(tcfg, server.url)  # what `driftloop demo` prints
        dom = rendered(browser, link, tmp_path)
        for text in ("first model by hand v1", "retrain after accuracy drop (incident inc-8) v1→v2",
                     f"{tcfg.model.name} recent window", "Model registry"):  # runs, datasets, the ML navigation
            assert text in dom, (text, dom[-2000:])
        assert "Detect Issues" not in dom and "Training runs" not in dom  # not the GenAI view
        exp_id = link.split("/experiments/")[1].split("/")[0]
        dom = rendered(browser, run_url(server.url, exp_id, out.run_id), tmp_path)
        for text in ("Retrain of v1", "accuracy drop; incident", "inc-8", "Model registry"):
            assert text in dom, (text, dom[-2000:])
        assert "Evaluation runs" not in dom
    finally:
        server.stop()
