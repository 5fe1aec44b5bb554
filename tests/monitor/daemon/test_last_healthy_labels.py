"""An incident's ``window_start`` (where a retrain without a located change point starts taking rows)
is the end of what the last healthy check *judged*: its newest labelled row, not the newest row of
its window. With labels one batch late, the last healthy window already holds the first batch of the
new concept, unlabelled; taking its end as the start left no labelled row after it, so the retrain fell
back to the most recent rows, half of them the old concept (an outside evaluation: a sign flip on a
binary stream, 0.82 -> 0.47, retrained on 1,000 old + 1,000 new rows and promoted a 0.67 model)."""

from __future__ import annotations

from types import SimpleNamespace

from monitor.config import load_config
from monitor.daemon.decisions.breach import Observation
from monitor.daemon.decisions.policy import AlertPolicy
from monitor.daemon.runtime.checks import CheckOutcome
from monitor.daemon.runtime.controller import Controller
from monitor.daemon.state.attempts import AttemptStore
from monitor.daemon.state.incidents import IncidentStore


def _controller(cfg, engine, clock) -> Controller:
    return Controller(
        cfg,
        SimpleNamespace(engine=engine),
        None,
        None,  # type: ignore[arg-type]
        IncidentStore(engine, cfg.model.name, clock),
        AttemptStore(engine, cfg.model.name, clock),
        AlertPolicy(cfg.alerts, min_labels=1000),
        None,
        None,
        None,
        clock,
    )  # type: ignore[arg-type]


def test_the_incident_starts_after_the_last_labelled_row_judged_healthy(engine, clock, tmp_path):
    cfg = load_config(path=None, environ={}, overrides={"home": str(tmp_path / "home")})
    ctl = _controller(cfg, engine, clock)
    clock.advance(300)
    labels_end, window_end = clock() - 60, clock()  # the window's newest batch: no labels yet
    healthy = Observation(
        labelled_rows=1000,
        task="binary",
        accuracy=0.82,
        roc_auc=0.90,
        baseline_accuracy=0.82,
        baseline_roc_auc=0.90,
        champion_version="1",
    )
    ctl._act(
        CheckOutcome(clock(), "ok", "checked", window_end=window_end, labels_end=labels_end),
        ctl.policy.observe(healthy),
    )
    clock.advance(300)
    # Labels of that batch arrive: the estimate saw the drop, the labels predate it (a suspected incident).
    suspected = Observation(
        labelled_rows=3000,
        task="binary",
        accuracy=0.82,
        roc_auc=0.90,
        baseline_accuracy=0.82,
        baseline_roc_auc=0.90,
        champion_version="1",
        estimated_accuracy=0.60,
        estimated_accuracy_upper=0.65,
        labelled_estimate=0.81,
        rows_after_labels=True,
    )
    ctl._act(
        CheckOutcome(clock(), "ok", "checked", window_end=clock(), labels_end=clock() - 60),
        ctl.policy.observe(suspected),
    )
    (incident,) = ctl.incidents.recent()
    assert incident.window_start == labels_end


def test_without_labels_end_the_window_end_is_kept(engine, clock, tmp_path):
    cfg = load_config(path=None, environ={}, overrides={"home": str(tmp_path / "home")})
    ctl = _controller(cfg, engine, clock)
    clock.advance(300)
    healthy = Observation(
        labelled_rows=1000,
        task="binary",
        accuracy=0.82,
        roc_auc=0.90,
        baseline_accuracy=0.82,
        baseline_roc_auc=0.90,
        champion_version="1",
    )
    ctl._act(CheckOutcome(clock(), "ok", "checked", window_end=clock()), ctl.policy.observe(healthy))
    assert ctl._last_healthy_end == clock()
