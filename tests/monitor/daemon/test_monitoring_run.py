"""The monitoring run against a real MLflow (SQLite): a daemon's checks are steps of one run per
champion version, linked to the version; a new champion gets its own run and ends the old one; a
restarted daemon continues the run; MLflow unreachable costs no check."""
from __future__ import annotations

import time

from monitor.daemon.runtime.monitoring_run import MonitoringFeed
from tests.conftest import free_port
from trainer import registry as reg
from trainer.monitoring_runs import KIND, VERSION_RUN_TAG, MonitoringRuns


def monitoring_runs(cfg) -> dict[str, object]:
    """version → run, for the model's monitoring runs."""
    client = reg.Registry(cfg).client
    exp = client.get_experiment_by_name(cfg.experiment_name)
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.`driftloop.kind` = '{KIND}'")
    return {r.data.tags["driftloop.version"]: r for r in runs}


def steps(cfg, run_id: str, metric: str) -> list[tuple[int, int]]:
    history = reg.Registry(cfg).client.get_metric_history(run_id, metric)
    return sorted((m.step, m.timestamp) for m in history)


def test_checks_are_steps_of_one_run_per_champion_version(make_daemon, clock):
    daemon, traffic = make_daemon()
    cfg = daemon.cfg
    reports = []
    for seed in (11, 12, 13):
        traffic.send(400, seed)
        clock.advance(600)
        reports.append(daemon.run_check_now())
        assert daemon.monitoring.flush(60)
    assert [r.outcome.status for r in reports] == ["ok"] * 3
    runs = monitoring_runs(cfg)
    assert list(runs) == ["1"]
    run = runs["1"]
    assert run.info.status == "RUNNING" and run.info.run_name == "monitor v1"
    expected = [(r.outcome.id, int(r.outcome.ts * 1000)) for r in reports]
    for metric in ("accuracy", "roc_auc", "drift_share", "prediction_drift_score", "labelled_rows"):
        assert steps(cfg, run.info.run_id, metric) == expected, metric
    registry = reg.Registry(cfg)
    assert registry.client.get_model_version(registry.name, "1").tags[VERSION_RUN_TAG] == run.info.run_id

    # Another version becomes champion (registered from v1's model: no training needed here).
    with reg.session(cfg):  # a models:/ source is resolved against the process's tracking URI
        v1 = registry.client.get_model_version(registry.name, "1")
        v2 = registry.register(v1.source, v1.run_id, getattr(v1, "model_id", None))
        registry.make_champion(v2)
    traffic.send(400, 14)
    clock.advance(600)
    assert daemon.run_check_now().outcome.champion_version == v2
    assert daemon.monitoring.flush(60)
    runs = monitoring_runs(cfg)
    assert runs["1"].info.status == "FINISHED" and runs[v2].info.status == "RUNNING"
    assert registry.client.get_model_version(registry.name, v2).tags[VERSION_RUN_TAG] == runs[v2].info.run_id
    assert len(steps(cfg, runs[v2].info.run_id, "accuracy")) == 1
    daemon.stop()

    # A restarted daemon finds v2's run instead of making another; a rollback re-opens v1's.
    again, traffic = make_daemon(name="home")
    traffic.send(400, 15)
    clock.advance(600)
    again.run_check_now()
    assert again.monitoring.flush(60)
    assert len(steps(cfg, runs[v2].info.run_id, "accuracy")) == 2 and len(monitoring_runs(cfg)) == 2
    registry.roll_back()
    traffic.send(400, 16)
    clock.advance(600)
    again.run_check_now()
    assert again.monitoring.flush(60)
    runs = monitoring_runs(cfg)
    assert runs["1"].info.status == "RUNNING" and runs[v2].info.status == "FINISHED"
    assert len(steps(cfg, runs["1"].info.run_id, "accuracy")) == 4
    assert again.monitoring.dropped == again.monitoring.failures == 0


def test_mlflow_unreachable_costs_no_check(make_daemon, make_config, clock):
    """The champion is served from its registry; the monitoring run's MLflow is down (nothing
    listens on its port): checks succeed at their usual pace and the figures wait."""
    cfg = make_config()
    down = cfg.model_copy(update={"mlflow": cfg.mlflow.model_copy(
        update={"tracking_uri": f"http://127.0.0.1:{free_port()}", "timeout_seconds": 1.0})})
    daemon, traffic = make_daemon()
    daemon.after_check.remove(daemon.monitoring)
    daemon.monitoring = MonitoringFeed(MonitoringRuns(down))
    daemon.after_check.append(daemon.monitoring)
    traffic.send(400, 21)
    started = time.perf_counter()
    assert daemon.run_check_now().outcome.status == "ok"
    took = time.perf_counter() - started
    assert daemon.monitoring.flush(30)
    assert daemon.monitoring.failures == 1 and daemon.monitoring.pending == 1 and daemon.monitoring.logged == 0
    assert took < 30
    assert monitoring_runs(cfg) == {}
