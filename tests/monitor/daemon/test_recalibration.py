"""The daemon recalibrates a label-free estimate that labels keep proving wrong, says so, and keeps
the recalibration across a restart. Real store, real Evidently, the real champion from MLflow.

The champion's scores stop meaning what they meant on its reference (the concept moves, the inputs
do not): the estimate stays where the reference put it while the labelled accuracy falls. The
thresholds are set out of reach so no incident or retrain moves the champion meanwhile."""
from __future__ import annotations

from tests.monitor.daemon.conftest import Traffic
from tests.monitor.daemon.test_controller import samples

QUIET = {"alerts": {"accuracy_drop": 0.9, "auc_drop": 0.9}, "drift": {"fast_lane": False,
                                                                      "estimation_recalibrate_windows": 3}}


def _check(daemon, traffic, seed):
    traffic.send(1500, seed, concept=1.0)
    report = daemon.run_check_now()
    assert report.outcome.status == "ok" and report.incident is None, report.action
    return report.outcome.result.estimation_check


def test_estimate_outside_its_band_three_windows_is_recalibrated_inside_and_survives_a_restart(make_daemon):
    daemon, traffic = make_daemon(QUIET)
    daemon.start(scheduler=False)
    checks = [_check(daemon, traffic, seed) for seed in (40, 41, 42)]
    assert all(not c["inside"] and c["estimated"] - c["realised"] > 0.05 for c in checks), checks
    watch = daemon.estimation
    assert watch.recalibrations == 1 and watch.last is not None and watch.last.rows == 1500
    assert "recalibrated" in watch.last.message and len(watch.last.windows) == 3
    assert samples(daemon)[("driftloop_estimation_recalibrations_total", ())] == 1
    version = daemon.controller.last_check.outcome.champion_version
    assert watch.files.rows(version) is not None and len(watch.files.history(version)) == 1
    after = _check(daemon, traffic, 43)
    assert after["inside"], after
    daemon.stop(grace=2)

    daemon, _ = make_daemon(QUIET)   # same home: a restart
    daemon.start(scheduler=False)
    assert samples(daemon)[("driftloop_estimation_recalibrations_total", ())] == 1
    traffic = Traffic(daemon.cfg, daemon.store, start=traffic.t)
    restarted = _check(daemon, traffic, 44)
    assert restarted["inside"] and abs(restarted["realised"] - restarted["estimated"]) < 0.03, restarted
    assert daemon.estimation.recalibrations == 1


def test_stationary_windows_stay_inside_and_zero_turns_recalibration_off(make_daemon):
    daemon, traffic = make_daemon({"drift": {"estimation_recalibrate_windows": 1}})
    daemon.start(scheduler=False)
    for seed in (50, 51):
        traffic.send(1500, seed)
        check = daemon.run_check_now().outcome.result.estimation_check
        assert check is not None and check["inside"], check
    assert daemon.estimation.recalibrations == 0
    off, traffic = make_daemon({"drift": {"estimation_recalibrate_windows": 0, "fast_lane": False},
                                "alerts": {"accuracy_drop": 0.9, "auc_drop": 0.9}}, name="off")
    off.start(scheduler=False)
    for seed in (52, 53):
        assert not _check(off, traffic, seed)["inside"]
    assert off.estimation.recalibrations == 0 and off.estimation.last is None


def test_the_same_labelled_rows_are_not_refitted_twice(tmp_path):
    """A streak completed on the rows the estimator was last refitted on (no label since) refits
    nothing; new labelled rows do. Before, a window whose refit stayed outside its band was
    recalibrated on every second check while no label arrived: 5 identical notes in a minute."""
    from types import SimpleNamespace

    from monitor.config import load_config
    from monitor.daemon.runtime.estimation_watch import EstimationWatch
    from tests.monitor.drift.conftest import window

    cfg = load_config(path=None, environ={}, overrides={"home": str(tmp_path),
                                                        "drift": {"estimation_recalibrate_windows": 1}})
    frames = {"rows": window(1500, seed=60, concept_shift=1.0)}
    frames["rows"]["ts"] = range(1500)
    watch = EstimationWatch(cfg, rows=lambda version: frames["rows"], clock=lambda: 1.0, folder=tmp_path / "cal")
    outside = SimpleNamespace(champion_version="1", result=SimpleNamespace(estimation_check={
        "rows": 1500, "inside": False, "figure": "accuracy", "realised": 0.70, "estimated": 0.80}))
    assert watch.observe(outside) is not None and watch.recalibrations == 1
    assert watch.observe(outside) is None and watch.observe(outside) is None      # the same rows
    assert watch.recalibrations == 1 and len(watch.files.history("1")) == 1
    frames["rows"] = window(1600, seed=61, concept_shift=1.0)                      # new labels arrived
    frames["rows"]["ts"] = range(1600)
    assert watch.observe(outside) is not None and watch.recalibrations == 2
