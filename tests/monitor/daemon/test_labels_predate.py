"""A warning on the estimate when the labels predate the drop (issue 34, item 3): a multiclass
check estimated 0.703 [0.685, 0.720], the whole band past the 0.740 bar, but its 3,000 labelled
rows were all from before the drop (0.769), so the verdict read "within thresholds".

Pure policy tests, and the controller's decision on a real SQLite incident store (fast)."""
from __future__ import annotations

from types import SimpleNamespace

from monitor.config import AlertsConfig, load_config
from monitor.daemon.decisions.actions import ActionKind
from monitor.daemon.decisions.breach import Observation
from monitor.daemon.decisions.kinds import State
from monitor.daemon.decisions.policy import AlertPolicy
from monitor.daemon.runtime.checks import CheckOutcome
from monitor.daemon.runtime.controller import Controller, labelled_estimate
from monitor.daemon.state.attempts import AttemptStore
from monitor.daemon.state.incidents import IncidentStore


def window(*, labels_before_drop: bool = True, on_labels: float = 0.766, **kw) -> Observation:
    """The issue's multiclass window: 3,000 labelled rows realising 0.769, the estimate of the whole
    window 0.703 [0.685, 0.720] against a baseline of 0.770 (accuracy_drop 0.03: bar 0.740)."""
    base = dict(labelled_rows=3000, task="multiclass", accuracy=0.769, roc_auc=0.93, baseline_accuracy=0.770,
                baseline_roc_auc=0.93, champion_version="1", estimated_accuracy=0.703,
                estimated_accuracy_upper=0.720, labelled_estimate=on_labels, rows_after_labels=labels_before_drop)
    return Observation(**{**base, **kw})


def policy(**alerts) -> AlertPolicy:
    return AlertPolicy(AlertsConfig(**alerts), min_labels=1000)


def test_labels_all_before_the_drop_leave_the_estimate_to_speak_suspected():
    v = policy().observe(window())
    assert v.labels_predate_change and v.suspect and not v.fire and not v.retrain
    assert not v.performance_known and v.healthy_for("performance") is None  # old labels prove no health
    (b,) = v.suspected
    assert (b.reason, b.value, b.bound, b.baseline) == ("accuracy", 0.703, 0.720, 0.770)


def test_labels_that_cover_the_drop_judge_as_before():
    # The estimate on the labelled rows sees the drop too: the labels are from after it, and judge.
    assert not policy().observe(window(on_labels=0.70, accuracy=0.70)).labels_predate_change
    # No rows newer than the newest label: nothing for the estimate to see that the labels do not.
    v = policy().observe(window(labels_before_drop=False))
    assert not v.labels_predate_change and v.performance_known and not v.suspect
    # A band that reaches back inside the bar is no warning.
    assert not policy().observe(window(estimated_accuracy_upper=0.745)).suspect
    # Without the estimate on the labelled rows, nothing tells when the labels are from.
    assert not policy().observe(window(labelled_estimate=None)).labels_predate_change


def test_a_realised_breach_still_fires_on_its_own():
    v = policy().observe(window(accuracy=0.70))
    assert v.fire and v.retrain and not v.labels_predate_change


def test_regression_reads_the_mae_band_from_below():
    obs = Observation(labelled_rows=3000, task="regression", mae=10.1, baseline_mae=10.0, champion_version="1",
                      estimated_mae=13.0, estimated_mae_lower=12.0, labelled_estimate=10.2, rows_after_labels=True)
    v = policy().observe(obs)
    assert v.labels_predate_change and v.suspect and [b.reason for b in v.suspected] == ["mae"]


def test_the_estimate_on_the_labelled_rows_is_read_in_the_tasks_headline_figure():
    check = {"figure": "accuracy", "rows": 3000, "realised": 0.769, "estimated": 0.766, "band": [0.75, 0.78]}
    assert labelled_estimate(SimpleNamespace(task="multiclass", estimation_check=check)) == 0.766
    assert labelled_estimate(SimpleNamespace(task="regression", estimation_check=check)) is None
    assert labelled_estimate(SimpleNamespace(task="binary", estimation_check=None)) is None


def test_the_controller_opens_a_suspected_incident_and_does_not_retrain(engine, clock, tmp_path):
    cfg = load_config(path=None, environ={}, overrides={"home": str(tmp_path / "home")})
    ctl = Controller(cfg, SimpleNamespace(engine=engine), None, None,  # type: ignore[arg-type]
                     IncidentStore(engine, cfg.model.name, clock), AttemptStore(engine, cfg.model.name, clock),
                     AlertPolicy(cfg.alerts, min_labels=1000), None, None, None, clock)  # type: ignore[arg-type]
    for expected in (ActionKind.OPENED_SUSPECTED, ActionKind.SUSPECT_PERSISTS):
        clock.advance(300)
        action = ctl._act(CheckOutcome(clock(), "ok", "checked", window_end=clock()), ctl.policy.observe(window()))
        assert action.kind is expected and action.retrain is None, action
    (incident,) = ctl.incidents.recent()
    assert incident.state is State.SUSPECTED and not incident.retrain and ctl.attempts.for_incident(incident.id) == []


def test_a_real_check_whose_labels_all_predate_the_drop_is_suspected(tmp_path):
    """The real evaluation (CBPE on the reference, the estimate on the labelled rows) of a multiclass
    window: 3,000 labelled rows as before, then 3,000 rows the model is far less sure of, unlabelled."""
    import numpy as np
    import pandas as pd

    from monitor.daemon.runtime.controller import observation
    from monitor.tasks import internal_proba_columns
    from tests.monitor.daemon.task_frames import checked, task_config
    from tests.monitor.drift.task_frames import K, multiclass_frame

    cfg = task_config("multiclass", tmp_path)
    before = multiclass_frame(3000, 2)
    after = multiclass_frame(3000, 3, labelled=0.0)
    columns = internal_proba_columns(K)
    proba = 0.35 * after[columns].to_numpy() + 0.65 / K          # the drop: the model is far less sure
    after[columns] = proba
    after["score"] = proba.max(axis=1)
    baseline = float((before["prediction"] == before["label"]).mean())
    outcome = checked(cfg, multiclass_frame(3000, 1, window=False), pd.concat([before, after], ignore_index=True),
                      {"accuracy": baseline, "roc_auc": 0.0})
    outcome.labels_end, outcome.window_end = 1.0, 2.0              # the labelled rows are the older half
    obs = observation(outcome)
    assert obs.labelled_estimate is not None and obs.rows_after_labels
    v = AlertPolicy(cfg.alerts, min_labels=cfg.drift.min_labels, drift=cfg.drift).observe(obs)
    assert v.labels_predate_change and v.suspect and not v.fire, (v.message, obs.estimated_accuracy_upper, baseline)
    assert obs.accuracy is not None and np.isclose(obs.accuracy, baseline)  # the labels alone: within thresholds
