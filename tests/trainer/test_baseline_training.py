import time

import numpy as np
import pytest
from mlflow import MlflowClient

from monitor.errors import DataError, RegistryError
from tests.conftest import free_port
from tests.trainer.conftest import make_config
from trainer import load_champion, train_baseline
from trainer.loop import TrainingInterrupted
from trainer.registry import ChampionCache
from trainer.synthetic import make_dataset


def client(cfg) -> MlflowClient:
    return MlflowClient(tracking_uri=cfg.tracking_uri, registry_uri=cfg.tracking_uri)


def test_baseline_is_registered_logged_and_becomes_champion(tcfg, champion):
    c = client(tcfg)
    assert champion.version == "1" and champion.champion
    assert str(c.get_model_version_by_alias(tcfg.registered_model_name, "champion").version) == "1"
    run = c.get_run(champion.run_id)
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "first model by hand v1"
    assert run.data.tags["driftloop.trigger"] == "manual" and run.data.tags["driftloop.kind"] == "baseline"
    assert run.data.params["loop.batch_size"] == str(tcfg.training.batch_size)
    assert 0.8 < run.data.metrics["test_accuracy"] < 0.95 and run.data.metrics["test_roc_auc"] > 0.85
    epochs = int(run.data.metrics["epochs_run"])
    for key in ("train_loss", "val_loss", "val_accuracy", "val_roc_auc"):
        assert [m.step for m in c.get_metric_history(champion.run_id, key)] == list(range(1, epochs + 1))
    artifacts = {a.path for a in c.list_artifacts(champion.run_id, "baseline")}
    assert artifacts == {"baseline/reference.parquet", "baseline/metrics.json", "baseline/intervals.json"}
    # How precisely the held-out test rows measured its figures: the loaded champion carries it.
    loaded = load_champion(tcfg)
    intervals, accuracy = loaded.baseline.intervals, run.data.metrics["test_accuracy"]
    assert intervals["rows"] == int(run.data.params["test_rows"]) and intervals["confidence"] == tcfg.drift.confidence
    low, high = intervals["accuracy"]
    assert low < accuracy < high and 0.01 < high - low < 0.2
    assert intervals["roc_auc"][0] < run.data.metrics["test_roc_auc"] < intervals["roc_auc"][1]
    exp = c.get_experiment(run.info.experiment_id)
    assert exp.name == tcfg.experiment_name and exp.artifact_location.startswith(tcfg.artifact_root.as_uri())


def test_a_second_baseline_does_not_take_over(tcfg, champion):
    second = train_baseline(tcfg, make_dataset(800, seed=2), trigger="schedule")
    assert second.version == "2" and not second.champion
    assert str(client(tcfg).get_model_version_by_alias(tcfg.registered_model_name, "champion").version) == "1"


def test_load_champion_returns_model_and_baseline_and_caches_by_version(tcfg, champion):
    import mlflow.pyfunc
    cache = ChampionCache()
    loaded = load_champion(tcfg, cache=cache)
    assert (loaded.version, loaded.run_id) == ("1", champion.run_id)
    ref = loaded.baseline.reference
    assert list(ref.columns) == tcfg.model.feature_names + ["label", "score"]
    assert len(ref) == tcfg.training.reference_sample
    np.testing.assert_allclose(loaded.predict_proba(ref), ref["score"], rtol=1e-6)
    assert loaded.baseline.metrics == {k: champion.metrics[k] for k in ("accuracy", "roc_auc")}
    assert load_champion(tcfg, cache=cache) is loaded
    # The registered model is a plain pyfunc: raw DataFrame in, probabilities out.
    pyfunc = mlflow.pyfunc.load_model(client(tcfg).get_model_version_download_uri(tcfg.registered_model_name, "1"))
    features = ref[tcfg.model.feature_names].head(20)
    np.testing.assert_allclose(pyfunc.predict(features), loaded.predict_proba(features), rtol=1e-6)


def test_no_champion_is_a_registry_error(tcfg):
    with pytest.raises(RegistryError, match="has no 'champion' version; train one first"):
        load_champion(tcfg, cache=ChampionCache())


def test_bad_data_fails_before_anything_is_logged(tcfg):
    with pytest.raises(DataError, match="single class"):
        train_baseline(tcfg, make_dataset(500).assign(label=0))
    assert client(tcfg).get_experiment_by_name(tcfg.experiment_name) is None
    assert not tcfg.checkpoints_dir.exists()


def test_unreachable_mlflow_fails_fast_before_training(tmp_path):
    cfg = make_config(tmp_path / "home", mlflow={"tracking_uri": f"http://127.0.0.1:{free_port()}",
                                                "timeout_seconds": 2})
    started = time.monotonic()
    with pytest.raises(RegistryError, match=r"MLflow tracking server http://127\.0\.0\.1:\d+ is unreachable"):
        train_baseline(cfg, make_dataset(500))
    assert time.monotonic() - started < 10
    assert not cfg.checkpoints_dir.exists()
    with pytest.raises(RegistryError, match="file stores are not supported"):
        train_baseline(make_config(tmp_path / "h2", mlflow={"tracking_uri": "file:///tmp/mlruns"}), make_dataset(500))


def test_interrupted_training_resumes_into_the_same_run(tcfg):
    data = make_dataset(1000, seed=4)
    with pytest.raises(TrainingInterrupted):
        train_baseline(tcfg, data, should_stop=lambda state: state.step == 30)
    c = client(tcfg)
    [killed] = c.search_runs([c.get_experiment_by_name(tcfg.experiment_name).experiment_id])
    assert killed.info.status == "KILLED"
    outcome = train_baseline(tcfg, data, resume=True)
    assert outcome.run_id == killed.info.run_id
    run = c.get_run(outcome.run_id)
    assert run.info.status == "FINISHED"
    assert len(c.get_metric_history(outcome.run_id, "val_loss")) == int(run.data.metrics["epochs_run"])
