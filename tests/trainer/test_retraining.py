import json
import time

import pandas as pd
import pytest
from mlflow import MlflowClient

from monitor.errors import DataError, RegistryError, UserInputError
from tests.conftest import free_port
from tests.trainer.conftest import make_config
from trainer import load_champion, retrain, rollback
from trainer.synthetic import make_dataset


def client(cfg) -> MlflowClient:
    return MlflowClient(tracking_uri=cfg.tracking_uri, registry_uri=cfg.tracking_uri)


def alias(cfg, name):
    return str(client(cfg).get_model_version_by_alias(cfg.registered_model_name, name).version)


def retrain_runs(cfg):
    c = client(cfg)
    exp = c.get_experiment_by_name(cfg.experiment_name)
    return c.search_runs([exp.experiment_id], "tags.`driftloop.kind` = 'retrain'") if exp else []


def test_concept_drift_retrain_beats_the_champion_and_is_promoted(tcfg, champion, tmp_path):
    report = tmp_path / "drift-report.html"
    report.write_text("<html>evidently</html>")
    window = make_dataset(1500, seed=21, concept_shift=1.0)
    out = retrain(tcfg, window, trigger="alert", incident_id=12, report_paths=[report],
                  data_window={"last_n": 1500})
    assert out.outcome == "promoted", out.reasons
    assert (out.challenger_version, out.champion_version, out.previous_champion_version) == ("2", "2", "1")
    assert out.metrics["challenger_accuracy"] >= out.metrics["champion_accuracy"] + 0.03
    assert out.metrics["holdout_rows"] == 450 and out.duration_seconds > 0 and out.samples_per_second > 0
    assert (alias(tcfg, "champion"), alias(tcfg, "previous-champion"), alias(tcfg, "challenger")) == ("2", "1", "2")

    run = client(tcfg).get_run(out.run_id)
    tags = run.data.tags
    assert run.info.run_name == "retrain after an alert (incident 12) v1→v2"
    assert (tags["driftloop.trigger"], tags["driftloop.incident_id"],
            tags["driftloop.parent_version"]) == ("alert", "12", "1")
    assert json.loads(tags["driftloop.data_window"]) == {"last_n": 1500}
    assert tags["driftloop.outcome"] == "promoted" and run.data.metrics["promoted"] == 1.0
    assert [a.path for a in client(tcfg).list_artifacts(out.run_id, "reports")] == ["reports/drift-report.html"]

    # The new champion brings its own baseline: recent rows scored by the challenger.
    new = load_champion(tcfg)
    assert new.version == "2"
    assert new.baseline.metrics["accuracy"] == out.metrics["challenger_accuracy"]
    # ...measured on the 450 held-out rows, with the interval the daemon judges it by.
    low, high = new.baseline.intervals["accuracy"]
    assert new.baseline.intervals["rows"] == 450 and low < out.metrics["challenger_accuracy"] < high
    assert 0.03 < high - low < 0.15  # about ±0.035 on 450 rows
    assert abs(new.baseline.reference["label"].mean() - window["label"].mean()) < 0.05


def test_retrain_on_unchanged_data_is_rejected_with_reasons(tcfg, champion):
    out = retrain(tcfg, make_dataset(1500, seed=31), trigger="schedule")
    assert out.outcome == "rejected"
    assert out.reasons and any("accuracy gain" in r for r in out.reasons), out.reasons
    assert (out.challenger_version, out.champion_version, out.previous_champion_version) == ("2", "1", None)
    assert (alias(tcfg, "champion"), alias(tcfg, "challenger")) == ("1", "2")
    mv = client(tcfg).get_model_version(tcfg.registered_model_name, "2")
    assert mv.tags["driftloop.outcome"] == "rejected" and "accuracy gain" in mv.tags["driftloop.reasons"]
    assert client(tcfg).get_run(out.run_id).data.metrics["promoted"] == 0.0


def test_rollback_goes_back_one_champion_at_a_time(tcfg, champion):
    assert retrain(tcfg, make_dataset(1500, seed=21, concept_shift=1.0)).outcome == "promoted"
    assert rollback(tcfg) == ("2", "1")
    assert alias(tcfg, "champion") == "1"
    assert load_champion(tcfg).version == "1"
    with pytest.raises(RegistryError, match="no previous champion to roll back to"):
        rollback(tcfg)


def _one_positive():
    rows = make_dataset(600, seed=3)
    return pd.concat([rows[rows.label == 0].head(150), rows[rows.label == 1].head(1)])


@pytest.mark.parametrize("window, message", [
    (make_dataset(0), "recent window is empty"),
    (make_dataset(400).assign(label=1), "single class"),
    (make_dataset(400).drop(columns="region"), "missing column(s) region"),
    (make_dataset(400).assign(x3=float("nan")), "feature column(s) x3 have no values (all missing)"),
    (make_dataset(400).assign(extra=1), "column(s) extra not in the model's features"),
    (make_dataset(60), "60 rows, need at least 100"),
    (_one_positive(), "too few rows to hold out a holdout set: class 1 has 1 row"),
])
def test_bad_windows_fail_before_any_training(tcfg, window, message):
    # No champion here: if the data were not checked first, this would be a RegistryError instead.
    with pytest.raises(DataError) as err:
        retrain(tcfg, window)
    assert message in str(err.value)
    assert retrain_runs(tcfg) == []
    assert not (tcfg.checkpoints_dir / f"retrain-{tcfg.model.name}.pt").exists()


def test_missing_report_or_bad_trigger_is_a_user_error(tcfg, tmp_path):
    with pytest.raises(UserInputError, match="report file"):
        retrain(tcfg, make_dataset(400), report_paths=[tmp_path / "missing.html"])
    with pytest.raises(UserInputError, match="trigger must be one of manual, alert, schedule"):
        retrain(tcfg, make_dataset(400), trigger="cron")


def test_no_champion_or_unreachable_mlflow_is_a_registry_error_before_training(tcfg, tmp_path):
    with pytest.raises(RegistryError, match="no 'champion' version"):
        retrain(tcfg, make_dataset(400))
    down = make_config(tmp_path / "down", mlflow={"tracking_uri": f"http://127.0.0.1:{free_port()}",
                                                 "timeout_seconds": 2})
    started = time.monotonic()
    with pytest.raises(RegistryError, match="unreachable"):
        retrain(down, make_dataset(400))
    assert time.monotonic() - started < 10
    assert not down.checkpoints_dir.exists()


def test_a_fresh_model_competes_when_the_evidence_is_large():
    from monitor.config import TrainingConfig
    from trainer.retraining import cold_start
    auto = TrainingConfig()
    assert cold_start(auto, concept_holds=False, rows=300)            # the concept changed
    assert not cold_start(auto, concept_holds=True, rows=300)         # fine-tuning suits a held concept
    assert cold_start(auto, concept_holds=True, rows=auto.cold_start_rows)  # large evidence: both compete
    assert cold_start(auto, concept_holds=True, rows=1200, champion_rows=500)  # twice what the champion knew
    assert not cold_start(auto, concept_holds=True, rows=1200, champion_rows=5000)
    assert not cold_start(TrainingConfig(cold_start="never"), concept_holds=False, rows=10_000)
    assert cold_start(TrainingConfig(cold_start="always"), concept_holds=True, rows=10)
    # A warm retrain trains until its validation loss stops improving, not for a fixed 8 epochs.
    assert auto.retrain_epochs is None


def test_categories_the_champion_never_saw_make_a_fresh_model_compete(tcfg, champion):
    """An upstream renamed every region: a warm start keeps the champion's vocabulary, where the
    renamed values all fall into one unknown bucket. A fresh model (its own vocabulary) competes,
    as it would after a change of concept; the same rows with the old names do not call for one."""
    from monitor.config import TrainingConfig
    from trainer.retraining import cold_start, unseen_share

    auto = TrainingConfig()
    assert cold_start(auto, concept_holds=True, rows=300, unseen=0.25)
    assert not cold_start(auto, concept_holds=True, rows=300, unseen=0.05)
    model = load_champion(tcfg).model
    window = make_dataset(800, seed=22)
    assert unseen_share(model, window) == (None, 0.0)
    renamed = window.assign(region=window["region"].str.upper())
    assert unseen_share(model, renamed) == ("region", 1.0)

    out = retrain(tcfg, renamed, trigger="alert", data_window={"last_n": 800})
    metrics = client(tcfg).get_run(out.run_id).data.metrics
    assert "cold_val_accuracy" in metrics and "warm_val_accuracy" in metrics  # both were trained


def test_a_warm_start_learns_categories_its_champion_never_saw(tcfg, champion):
    """A new region appears on a quarter of the rows, with its own strong effect, everything else as
    before: the warm start grows the champion's vocabulary and learns it (where it used to score the
    new rows through the unknown bucket), and the model it publishes serves it the same way exported."""
    import numpy as np

    from monitor.config import load_config
    cfg = load_config(path=None, environ={}, overrides={**tcfg.model_dump(mode="json", exclude={"server": {"token"}}),
                                                          "training": {**tcfg.training.model_dump(mode="json"),
                                                                       "cold_start": "never"}})
    window = make_dataset(1600, seed=31)
    new = np.random.default_rng(31).uniform(size=len(window)) < 0.25
    window.loc[new, "region"] = "mena"
    window.loc[new, "label"] = (np.random.default_rng(32).uniform(size=int(new.sum())) < 0.95).astype("int64")
    old = load_champion(cfg).model
    assert "mena" not in old.vocab["region"]

    out = retrain(cfg, window, trigger="alert", data_window={"last_n": 1600})
    assert out.outcome == "promoted", out.reasons
    model = load_champion(cfg).model
    assert model.vocab["region"][:len(old.vocab["region"])] == old.vocab["region"] and "mena" in model.vocab["region"]
    probe = make_dataset(400, seed=33)
    gain = model.predict_proba(probe.assign(region="mena")) - model.predict_proba(probe.assign(region="zzz"))
    assert gain.mean() > 0.1, gain.mean()  # "mena" is no longer the unknown bucket: it learnt its effect
    metrics = client(cfg).get_run(out.run_id).data.metrics
    assert "cold_val_accuracy" not in metrics  # the warm start alone did it
    assert metrics["export_onnx_accuracy"] == pytest.approx(metrics["export_torch_accuracy"], abs=0.005)
