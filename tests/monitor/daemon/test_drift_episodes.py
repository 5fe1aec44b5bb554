"""Drift incidents that do not flap (issue 34, item 2): hysteresis on dataset drift
(monitor/daemon/decisions/episodes.py), one incident per continuing drift with a count of its
drifted checks, and a drift that comes back soon reopening its resolved incident.

Pure policy tests, and the controller's decision (``_act``) on a real SQLite incident store fed
verdicts of the real policy: no Evidently, no MLflow, no child (fast)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from monitor.config import AlertsConfig, load_config
from monitor.daemon.decisions.actions import ActionKind
from monitor.daemon.decisions.breach import Observation
from monitor.daemon.decisions.episodes import DriftLatch
from monitor.daemon.decisions.kinds import State
from monitor.daemon.decisions.lifecycle import Event, step
from monitor.daemon.decisions.policy import AlertPolicy
from monitor.daemon.runtime.checks import CheckOutcome
from monitor.daemon.runtime.controller import Controller
from monitor.daemon.state.attempts import AttemptStore
from monitor.daemon.state.incidents import IncidentStore


def run(latch: DriftLatch, flags: str):
    """Feed 'D' (drifted), '.' (quiet), '?' (not judged); the episodes after each check."""
    return [latch.observe({"D": True, ".": False, "?": None}[c]) for c in flags]


def test_an_episode_starts_on_k_of_n_and_ends_after_m_quiet_checks():
    states = run(DriftLatch(open_checks=2, open_window=3, quiet_checks=3), "D.D.D..D...D")
    assert [s.active for s in states] == [False, False, True, True, True, True, True, True, True, True, False,
                                          False]
    assert [i for i, s in enumerate(states) if s.onset] == [2]
    assert [i for i, s in enumerate(states) if s.ended] == [10]
    # The episode counted its drifted checks (2 that started it, then 2 more), quiet ones not.
    assert states[9].drifted_checks == 4 and states[10].drifted_checks == 4
    # After it ended, one drifted check is not enough again: k fresh ones are needed.
    assert not states[11].active


def test_a_check_not_judged_changes_nothing():
    states = run(DriftLatch(1, 1, 2), "D?.?.")
    assert [s.active for s in states] == [True, True, True, True, False]
    assert [s.quiet for s in states] == [0, 0, 1, 1, 2]


def test_k_of_n_must_fit():
    with pytest.raises(ValueError):
        DriftLatch(open_checks=3, open_window=2)
    with pytest.raises(ValueError, match="at least drift_open_checks"):
        AlertsConfig(drift_open_checks=3, drift_open_window=2)
    assert AlertsConfig().drift_hysteresis == (1, 1, 3)
    assert AlertsConfig(sustained_windows=2).drift_hysteresis == (2, 2, 3)


def obs(drift: bool, acc: float = 0.87, labelled: int = 2000) -> Observation:
    return Observation(labelled_rows=labelled, accuracy=acc, roc_auc=0.93, baseline_accuracy=0.87,
                       baseline_roc_auc=0.93, champion_version="1", dataset_drift=drift)


def test_the_policy_fires_drift_through_the_episode_and_is_healthy_only_once_it_ended():
    policy = AlertPolicy(AlertsConfig(drift_open_checks=2, drift_open_window=3, drift_quiet_checks=2),
                         min_labels=1000)
    verdicts = [policy.observe(obs(d)) for d in (True, False, True, False, True, False, False)]
    assert [v.fire for v in verdicts] == [False, False, True, False, True, False, False]
    assert [v.drift.onset for v in verdicts] == [False, False, True, False, False, False, False]
    # Quiet checks inside the episode are not healthy for a drift incident; the episode's end is.
    assert [v.healthy_for("drift") for v in verdicts] == [True, True, False, False, False, False, True]
    assert verdicts[4].drift.drifted_checks == 3 and verdicts[-1].drift.ended


def test_a_new_champion_starts_a_new_episode():
    policy = AlertPolicy(AlertsConfig(), min_labels=1000)
    assert policy.observe(obs(True)).drift.onset
    assert not policy.observe(obs(True)).drift.onset
    again = policy.observe(Observation(labelled_rows=2000, accuracy=0.87, baseline_accuracy=0.87,
                                       champion_version="2", dataset_drift=True))
    assert again.drift.onset and again.drift.drifted_checks == 1


def test_reopen_is_the_only_move_out_of_resolved():
    assert step(State.RESOLVED, Event.REOPEN)[0] is State.FIRING


@pytest.fixture
def controller(engine, clock, tmp_path):
    """The controller's decisions on a real incident store; nothing it needs here does I/O beyond it."""
    def make(**alerts) -> Controller:
        cfg = load_config(path=None, environ={}, overrides={"home": str(tmp_path / "home"), "alerts": alerts})
        policy = AlertPolicy(cfg.alerts, min_labels=1000)
        ctl = Controller(cfg, SimpleNamespace(engine=engine), None, None,  # type: ignore[arg-type]
                         IncidentStore(engine, cfg.model.name, clock), AttemptStore(engine, cfg.model.name, clock),
                         policy, None, None, None, clock)  # type: ignore[arg-type]
        return ctl
    return make


def check(ctl: Controller, clock, drift: bool, acc: float = 0.87):
    clock.advance(300)
    verdict = ctl.policy.observe(obs(drift, acc))
    return ctl._act(CheckOutcome(clock(), "ok", "checked", window_end=clock()), verdict)


def test_one_continuing_drift_is_one_incident_with_its_count(controller, clock):
    """Issue 34: a covariate drift that goes on, with the model unhurt, opened 8 incidents (each
    resolved 'drift without performance impact' after 3 checks, reopened at the next)."""
    ctl = controller(drift_impact_windows=3)
    flags = [True] * 12 + [True, False, True, True, False, True] * 3
    actions = [check(ctl, clock, d) for d in flags]
    kinds = [a.kind for a in actions]
    assert kinds.count(ActionKind.OPENED) == 1 and ActionKind.REOPENED not in kinds
    assert kinds[3] is ActionKind.RESOLVED_NO_IMPACT  # the model is unhurt: resolved once, as before
    (incident,) = ctl.incidents.recent()
    assert incident.state is State.RESOLVED
    # Every drifted check of the episode is counted on it (visible in the incident and status).
    assert incident.drifted_checks == sum(flags)
    assert ctl.incidents.current() is None


def test_a_drift_back_within_the_window_reopens_its_incident_later_one_opens_another(controller, clock):
    ctl = controller(drift_quiet_checks=2, drift_reopen_seconds=3600)
    first = check(ctl, clock, True)
    assert first.kind is ActionKind.OPENED
    check(ctl, clock, False)
    assert check(ctl, clock, False).kind is ActionKind.RESOLVED  # 2 quiet checks end the episode
    back = check(ctl, clock, True)                                  # a new episode, 5 minutes later
    assert (back.kind, back.incident_id) == (ActionKind.REOPENED, first.incident_id)
    incident = ctl.incidents.get(first.incident_id)
    assert incident.state is State.FIRING and incident.resolved_at is None and incident.drifted_checks == 2
    assert [e["kind"] for e in ctl.incidents.events(incident.id)] == ["opened", "resolved", "firing"]
    assert ctl.incidents.events(incident.id)[-1]["data"]["drifted_checks"] == 1
    # Quiet again, and back only after the window: a new incident.
    check(ctl, clock, False)
    check(ctl, clock, False)
    clock.advance(3600)
    later = check(ctl, clock, True)
    assert later.kind is ActionKind.OPENED and later.incident_id != first.incident_id


def test_status_shows_the_count(controller, clock):
    from monitor.daemon.runtime.views import render_status
    ctl = controller()
    for _ in range(3):
        check(ctl, clock, True)
    (incident,) = ctl.incidents.open_incidents()
    assert incident.drifted_checks == 3
    text = render_status({"model": "demo", "champion": {"version": "1"}, "last_check": None,
                          "open_incidents": [incident.to_dict()], "recent_incidents": [], "recent_retrains": []})
    assert "drifted checks 3" in text
