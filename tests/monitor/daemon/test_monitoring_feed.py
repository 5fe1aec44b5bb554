"""The monitoring feed on its own (monitor/daemon/runtime/monitoring_run.py): which figures a check
gives, and that MLflow slow, down or refusing never fails or delays a check. A fake run log at the
seam; the real MLflow is in test_monitoring_run.py."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from monitor.daemon.decisions.actions import Action, ActionKind
from monitor.daemon.runtime.checks import CheckOutcome
from monitor.daemon.runtime.monitoring_run import (DERIVED_FIGURES, FEATURE_PREFIX, RESULT_FIGURES, MonitoringFeed,
                                                   check_figures, metric_key)
from monitor.daemon.runtime.moves import CheckReport
from monitor.drift.result import FeatureDrift
from monitor.errors import RegistryError
from tests.monitor.drift.task_frames import filled_result

ROOT = Path(__file__).resolve().parents[3]


def report(check_id: int, task: str = "binary", *, version: str = "1", status: str = "ok") -> CheckReport:
    result = filled_result(task) if status == "ok" else None
    outcome = CheckOutcome(1_000.0 + check_id, status, "checked", champion_version=version, result=result, id=check_id)
    return CheckReport(outcome, None, None, Action(ActionKind.NONE))


class FakeRuns:
    """Records what it was asked; ``down`` makes ``ready`` fail, ``refuse`` makes ``log`` fail,
    ``gate`` (an Event) makes ``ready`` wait for it."""

    def __init__(self):
        self.opened: list[str] = []
        self.logged: list[tuple[str, int]] = []
        self.down = self.refuse = False
        self.gate: threading.Event | None = None
        self.entered = threading.Event()  # the sender has asked ready()

    def ready(self) -> None:
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(10)
        if self.down:
            raise RegistryError("MLflow tracking server http://127.0.0.1:1 is unreachable")

    def open(self, version: str) -> str:
        self.opened.append(version)
        return f"run-{version}"

    def log(self, run_id, points) -> None:
        if self.refuse:
            raise RegistryError("INVALID_PARAMETER_VALUE")
        self.logged += [(run_id, p.step) for p in points]


@pytest.mark.parametrize("task,has,lacks", [
    ("binary", {"accuracy", "roc_auc", "estimated_accuracy", "baseline_accuracy", "f1"}, {"mae", "label_drift"}),
    ("multiclass", {"accuracy", "macro_f1", "estimated_macro_f1", "label_drift", "label_drift_score"}, {"mae"}),
    ("regression", {"mae", "rmse", "estimated_mae", "r2"}, {"accuracy", "roc_auc"}),
])
def test_a_check_gives_its_tasks_figures(task, has, lacks):
    figures = check_figures(report(7, task))
    assert has <= set(figures) and not lacks & set(figures)
    assert {"drift_share", "dataset_drift", "drifted_features", "prediction_drift", "prediction_drift_score",
            "labelled_rows", "window_rows", "incident_open", "feature_drift/x0"} <= set(figures)
    assert figures["dataset_drift"] == 1.0 and figures["drifted_features"] == 1.0 and figures["incident_open"] == 0.0
    assert set(figures) - {k for k in figures if k.startswith(FEATURE_PREFIX)} <= set(RESULT_FIGURES + DERIVED_FIGURES)


def test_feature_names_become_metric_names_mlflow_takes():
    assert metric_key("age") == "feature_drift/age"
    assert metric_key("a/b:c?") == "feature_drift/a_b_c_"
    assert metric_key("..") == "feature_drift/_" and metric_key("") == "feature_drift/_"


def test_nan_figures_are_left_out():
    r = report(1)
    r.outcome.result.features.append(FeatureDrift("x1", "ks", float("nan"), 0.05, False))
    r.outcome.result.roc_auc = float("nan")
    figures = check_figures(r)
    assert "roc_auc" not in figures and "feature_drift/x1" not in figures


def test_checks_go_to_their_versions_run_in_order():
    runs = FakeRuns()
    feed = MonitoringFeed(runs)
    for i, v in [(1, "1"), (2, "1"), (3, "2"), (4, "2"), (5, "1")]:
        feed(report(i, version=v))
        assert feed.flush(10)
    assert runs.logged == [("run-1", 1), ("run-1", 2), ("run-2", 3), ("run-2", 4), ("run-1", 5)]
    assert runs.opened == ["1", "2", "1"]  # opened once per change of champion, not per check
    assert (feed.logged, feed.dropped, feed.failures) == (5, 0, 0)


def test_failed_and_unrecorded_checks_are_not_fed():
    runs = FakeRuns()
    feed = MonitoringFeed(runs)
    feed(report(1, status="error"))
    unrecorded = report(2)
    unrecorded.outcome.id = None
    feed(unrecorded)
    assert feed.flush(10) and runs.logged == [] and feed.pending == 0


def test_mlflow_down_keeps_the_points_for_the_next_check():
    runs = FakeRuns()
    runs.down = True
    feed = MonitoringFeed(runs)
    feed(report(1))
    feed.flush(10)
    feed(report(2))
    feed.flush(10)
    assert runs.logged == [] and feed.pending == 2 and feed.failures == 2 and feed.dropped == 0
    runs.down = False
    feed(report(3))
    feed.flush(10)
    assert [s for _, s in runs.logged] == [1, 2, 3] and feed.pending == 0


def test_a_slow_mlflow_never_delays_a_check_and_the_queue_is_bounded():
    runs = FakeRuns()
    runs.gate = threading.Event()
    feed = MonitoringFeed(runs, capacity=3)
    feed(report(1))
    assert runs.entered.wait(10)  # the sender took check 1 and waits for MLflow (the gate)
    for i in range(2, 7):  # each returns while MLflow has not answered at all; the queue holds three
        feed(report(i))
    assert runs.logged == [] and feed.pending == 3 and feed.dropped == 2
    runs.gate.set()
    assert feed.flush(10)
    assert [s for _, s in runs.logged] == [1, 4, 5, 6]


def test_a_batch_mlflow_keeps_refusing_is_given_up():
    runs = FakeRuns()
    runs.refuse = True
    feed = MonitoringFeed(runs, max_tries=2)
    feed(report(1))
    feed.flush(10)
    assert feed.pending == 1
    feed(report(2))  # the second try of check 1 (with check 2): given up on 1, 2 waits its second try
    feed.flush(10)
    assert feed.pending == 1 and feed.dropped == 1
    runs.refuse = False
    feed(report(3))
    feed.flush(10)
    assert [s for _, s in runs.logged] == [2, 3]


def test_every_figure_is_documented():
    """docs/parts/daemon.md, "The monitoring run", names every metric the run gets."""
    text = (ROOT / "docs/parts/daemon.md").read_text()
    section = text[text.index("## The monitoring run"):]
    missing = [name for name in RESULT_FIGURES + DERIVED_FIGURES + (FEATURE_PREFIX,) if f"`{name}" not in section]
    assert missing == []
