"""The daemon per task, end to end in process: a multiclass and a regression champion trained by
the trainer (real PyTorch, real MLflow on SQLite), the task read from the champion as `driftloop
serve` reads it (with_champion_schema), predictions scored by the champion in the store, real
checks. A regression model whose MAE rises opens an incident named ``mae``; a multiclass model whose
accuracy drops opens one named ``accuracy``; their figures and the alert state reach /metrics."""
from __future__ import annotations

import itertools
import json
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor.cli import main
from monitor.commands._schema import with_champion_schema
from monitor.config import DriftloopConfig, load_config
from monitor.errors import ConfigError
from monitor.tasks import proba_column
from tests.monitor.daemon.conftest import SMALL, STUB_WORKER, merge
from tests.monitor.drift.task_frames import CLASSES, FEATURES, NUMERIC, multiclass_frame, regression_frame

pytestmark = pytest.mark.slow
FAST = {"training": {"export": {"onnx": False}}}


def _config(home, task: str | None = None, **over) -> DriftloopConfig:
    model = {} if task is None else {"task": task, "features": FEATURES,
                                     **({"classes": CLASSES} if task == "multiclass" else {})}
    return load_config(path=None, environ={}, overrides=merge(merge(SMALL, FAST), {"home": str(home), "model": model,
                                                                                   **over}))


@pytest.fixture(scope="module")
def champions(tmp_path_factory):
    """``{task: home}``: a registry holding champion v1 of that task (trained once per module)."""
    import trainer
    homes = {}
    for task, frame in (("regression", regression_frame(3000, 1, window=False)),
                        ("multiclass", multiclass_frame(3000, 1, window=False))):
        home = tmp_path_factory.mktemp(f"{task}-home")
        trainer.train_baseline(_config(home, task), frame)
        homes[task] = home
    return homes


@pytest.fixture
def task_daemon(champions, tmp_path, clock):
    """``task_daemon(task, **overrides)`` -> Daemon on a copy of that task's registry, configured with
    no task: the champion says (as `driftloop serve` does)."""
    from monitor.daemon.runtime.daemon import Daemon
    from monitor.daemon.retraining.launcher import ProcessLauncher
    made = []

    def make(task: str, **over):
        home = tmp_path / task
        home.mkdir()
        shutil.copy(champions[task] / "mlflow.db", home / "mlflow.db")
        cfg = with_champion_schema(_config(home, **over))
        root = home / "retrains"
        root.mkdir()
        (root / "behaviour").write_text("reject")
        daemon = Daemon(cfg, clock=clock, launcher=ProcessLauncher(root, module=STUB_WORKER))
        made.append(daemon)
        return daemon
    yield make
    for d in made:
        d.stop(grace=2)


_ids = itertools.count()


def send(daemon, frame: pd.DataFrame, start: float) -> None:
    """What a model service does: score ``frame`` with the champion, log the predictions, then the labels."""
    import trainer
    cfg = daemon.cfg
    champion = trainer.load_champion(cfg)
    out = pd.DataFrame({"id": [f"r{next(_ids)}" for _ in range(len(frame))], "ts": start + np.arange(len(frame)) * 0.5})
    for name in [*NUMERIC, "region"]:
        out[name] = frame[name].to_numpy()
    scored = champion.predict_proba(out)
    if cfg.model.task == "regression":
        out["prediction"] = scored
        labels = frame["label"].to_numpy(dtype="float64")
    else:
        for i, name in enumerate(CLASSES):
            out[proba_column(name)] = scored[:, i]
        labels = np.asarray(CLASSES, dtype=object)[frame["label"].astype("int64").to_numpy()]
    daemon.store.add_predictions(out, model_version=champion.version)
    daemon.store.add_labels(pd.DataFrame({"id": out["id"], "label": labels, "ts": out["ts"]}))


def series(daemon) -> dict[tuple[str, tuple], float]:
    text = generate_latest(daemon.registry).decode()
    return {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "model"))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_regression_mae_rise_opens_an_incident_named_mae(task_daemon):
    daemon = task_daemon("regression")
    assert daemon.cfg.model.task == "regression" and daemon.store.model.task == "regression"  # from the champion
    healthy = regression_frame(1500, 2)
    send(daemon, healthy, 1.7e9)
    first = daemon.run_check_now()
    assert first.outcome.status == "ok" and first.outcome.result.task == "regression", first.outcome.message
    assert not first.verdict.fire and first.incident is None, first.verdict.message
    assert first.verdict.healthy_for("mae") is True

    worse = regression_frame(1500, 3)
    worse["label"] = worse["label"] + 4.0          # the target moved: every prediction 4 units short
    send(daemon, worse, 1.7e9 + 1000)
    report = daemon.run_check_now()
    r = report.outcome.result
    assert r.mae > 1.1 * r.baseline_mae, (r.mae, r.baseline_mae)
    # MAE first (the headline); every prediction short by 2 residual SDs moves the MAPE and the residuals too
    assert report.verdict.fire and report.verdict.reason == "mae"
    assert report.verdict.firing == ("mae", "mape", "residual_shift")
    assert report.incident is not None and report.incident.reason == "mae"

    status = daemon.status()
    assert status["last_check"]["task"] == "regression" and status["last_check"]["mae"] == pytest.approx(r.mae)
    assert status["open_incidents"][0]["reason"] == "mae" and status["reference_level"]["mae"] == pytest.approx(
        r.baseline_mae)
    found = series(daemon)
    assert found[("driftloop_model_alert_firing", (("reason", "mae"),))] == 1.0
    assert ("driftloop_model_alert_firing", (("reason", "accuracy"),)) not in found
    assert found[("driftloop_incidents_total", (("reason", "mae"),))] == 1.0
    assert found[("driftloop_model_mae", ())] == pytest.approx(r.mae)
    assert found[("driftloop_model_reference_mae", ())] == pytest.approx(r.baseline_mae)
    assert found[("driftloop_model_version_mae", (("version", "1"),))] > 0
    assert daemon.reset_reference()["reference_mae"] == pytest.approx(r.baseline_mae)


def test_driftloop_check_reads_the_task_from_the_champion(task_daemon, tmp_path, capsys):
    """`driftloop check` with a config that names no task: the champion's (regression) is used, its
    breaches are named by metric, and --fail-on-breach exits 3 on the MAE rise."""
    daemon = task_daemon("regression")
    worse = regression_frame(1500, 4)
    worse["label"] = worse["label"] + 4.0
    send(daemon, worse, 1.7e9)
    path = tmp_path / "driftloop.yaml"
    path.write_text(yaml.safe_dump(merge(merge(SMALL, FAST), {"home": str(daemon.cfg.home)})))
    assert main(["--config", str(path), "check", "--json", "--no-report"]) == 0
    body = json.loads(capsys.readouterr().out)
    # every prediction 4 short: the MAE (headline), the MAPE and the residuals' mean all breach
    assert body["result"]["task"] == "regression" and body["breaches"] == ["mae", "mape", "residual_shift"]
    assert main(["--config", str(path), "check", "--no-report", "--fail-on-breach"]) == 3
    rows = [line.split() for line in capsys.readouterr().out.split("estimated")[0].splitlines()]
    assert [r[0] for r in rows
            if r and r[0] in ("mae", "rmse", "mape", "r2", "accuracy")] == ["mae", "rmse", "mape", "r2"]


def test_multiclass_accuracy_drop_opens_an_incident_named_accuracy(task_daemon):
    daemon = task_daemon("multiclass")
    assert daemon.cfg.model.task == "multiclass" and daemon.cfg.model.classes == CLASSES
    send(daemon, multiclass_frame(1500, 2, concept=True), 1.7e9)   # the classes were renamed: accuracy collapses
    report = daemon.run_check_now()
    r = report.outcome.result
    assert r.task == "multiclass" and r.accuracy < r.baseline_accuracy - 0.03, report.outcome.message
    assert report.verdict.fire and report.verdict.reason == "accuracy"
    assert report.incident is not None and report.incident.reason == "accuracy"
    found = series(daemon)
    assert found[("driftloop_model_alert_firing", (("reason", "accuracy"),))] == 1.0
    assert ("driftloop_model_alert_firing", (("reason", "precision"),)) not in found   # binary's reasons
    assert found[("driftloop_model_version_accuracy", (("version", "1"),))] == pytest.approx(r.accuracy)
    assert set(daemon.status()["last_check"]["class_recall"]) == set(CLASSES)


def test_rules_that_do_not_fit_the_champions_task_stop_the_daemon(task_daemon):
    with pytest.raises(ConfigError, match="recall does not apply to a regression model"):
        task_daemon("regression", alerts={"rules": [{"metric": "recall", "drop": 0.05}]})
