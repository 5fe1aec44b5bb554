"""The later change point found by re-scoring (monitor/daemon/runtime/rescan.py), on a real store and the
real MLflow champion: a step down in the champion's accuracy after the incident's change point is
found, a stationary stream and the champion's own training rows give none."""
from __future__ import annotations

import pytest

from monitor.daemon.runtime.rescan import follow, later_change


@pytest.fixture
def home(make_daemon):
    daemon, traffic = make_daemon()
    return daemon, traffic


def test_a_step_after_the_change_point_is_found_on_re_scored_rows(home):
    daemon, traffic = home
    since = traffic.t
    traffic.send(800, 60)                    # the champion's concept...
    step = traffic.t
    traffic.send(800, 61, concept=1.0)       # ...then another
    found = later_change(daemon.cfg, daemon.store, daemon.champion, since - 1, lambda v: None)
    assert found is not None
    change, ts, version = found
    assert abs(ts - step) < 60 * traffic.spacing and version == "1"
    assert change.accuracy_before - change.accuracy_after >= daemon.cfg.alerts.accuracy_drop
    # Rows the champion was trained on are not scanned: nothing left before the step to compare with.
    assert later_change(daemon.cfg, daemon.store, daemon.champion, since - 1, lambda v: step + 100) is None
    # Only a step after the incident's change point moves it.
    assert later_change(daemon.cfg, daemon.store, daemon.champion, step + 100, lambda v: None) is None

    ctl = daemon.controller
    incident = ctl.incidents.open("accuracy", "alert", "accuracy dropped", change_ts=since - 1)
    moved = follow(daemon.cfg, daemon.store, daemon.champion, ctl.incidents, ctl.attempts, incident)
    assert moved.change_ts == pytest.approx(ts)
    assert [e for e in ctl.incidents.events(incident.id) if e["kind"] == "change_point"]


def test_a_stationary_stream_has_no_later_change(home):
    daemon, traffic = home
    since = traffic.t
    traffic.send(1600, 62)
    assert later_change(daemon.cfg, daemon.store, daemon.champion, since - 1, lambda v: None) is None
