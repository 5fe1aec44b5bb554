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
    # Rows the champion was trained on are not scanned: no step is left to find, only that the rows after
    # its training data fall below its own held-out figure (below_own_figure), dated to the first of them.
    own = later_change(daemon.cfg, daemon.store, daemon.champion, since - 1, lambda v: step + 100)
    assert own is not None and own[0].rows_before == 0 and own[1] >= step + 100 - 1e-3  # whole microseconds
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


def test_the_champion_s_training_rows_are_in_sample_whichever_incident_promoted_it(home):
    """A concept that keeps moving opens incident after incident: the champion an earlier incident
    promoted was trained on rows up to its try's end, and a step inside those rows is its own fit,
    not a later change for the next incident; that incident's change came after them, so its change
    point moves to their end."""
    import pandas as pd

    daemon, traffic = home
    ctl = daemon.controller
    since = traffic.t
    traffic.send(800, 63)
    traffic.send(800, 64, concept=1.0)
    end = pd.Timestamp(traffic.t, unit="s", tz="UTC").isoformat()
    earlier = ctl.incidents.open("accuracy", "alert", "an earlier step", change_ts=since - 1)
    attempt = ctl.attempts.begin(earlier.id, "alert", rows=1600, data_window={"rows": 1600, "end": end})
    ctl.attempts.finish(attempt.id, "promoted", challenger_version="1", reasons=["test"])
    ctl.incidents.transition(earlier.id, "resolved", "test")
    later = ctl.incidents.open("accuracy", "alert", "the next step", change_ts=since - 1)
    moved = follow(daemon.cfg, daemon.store, daemon.champion, ctl.incidents, ctl.attempts, later)
    assert moved.change_ts == pytest.approx(pd.Timestamp(end).timestamp())
    assert any("end of champion v1's training data" in e["message"] for e in ctl.incidents.events(later.id))
    # A decline with no located step: its rows would start after the last healthy window, before them.
    ctl.incidents.transition(later.id, "resolved", "test")
    decline = ctl.incidents.open("accuracy", "alert", "a decline", window_start=since - 1)
    assert decline.change_ts is None
    moved = follow(daemon.cfg, daemon.store, daemon.champion, ctl.incidents, ctl.attempts, decline)
    assert moved.change_ts == pytest.approx(pd.Timestamp(end).timestamp())
    assert any("change point set to" in e["message"] for e in ctl.incidents.events(decline.id))
    # Within the incident that promoted it, the rows since its change are that change's evidence: kept.
    ctl.incidents.transition(decline.id, "resolved", "test")
    same = ctl.incidents.open("accuracy", "alert", "the same change", change_ts=since - 1)
    attempt = ctl.attempts.begin(same.id, "alert", rows=1600, data_window={"rows": 1600, "end": end})
    ctl.attempts.finish(attempt.id, "promoted", challenger_version="1", reasons=["test"])
    assert follow(daemon.cfg, daemon.store, daemon.champion, ctl.incidents, ctl.attempts, same).change_ts == since - 1
    # The same rows with no try behind the champion: the step is found.
    assert later_change(daemon.cfg, daemon.store, daemon.champion, since - 1, lambda v: None) is not None


def test_a_concept_that_moved_on_after_the_champion_s_training_data_is_a_later_change(home):
    """No step inside the newer rows (they are all of one moved concept), but together they fall
    below the champion's own held-out figure: the change is dated to the first of them, for a
    champion the loop trained up to a known end; without that end (a baseline), nothing moves."""
    daemon, traffic = home
    since = traffic.t
    traffic.send(600, 65)                        # rows the champion was trained on
    # Between the last of them and the next row: stored times are whole microseconds, and a float
    # end on a row's own time could round to either side of it.
    trained = traffic.t - traffic.spacing / 2
    traffic.send(700, 66, concept=1.0)           # after its training data, all of the moved concept
    found = later_change(daemon.cfg, daemon.store, daemon.champion, since - 1, lambda v: trained)
    assert found is not None
    change, ts, _ = found
    assert change.rows_before == 0 and change.rows_after == 700
    assert trained < ts <= trained + traffic.spacing  # the first row after its training data
    own = daemon.champion.get().baseline.metrics["accuracy"]
    assert change.before == pytest.approx(own) and own - change.after >= daemon.cfg.alerts.accuracy_drop
    # A champion not trained by the loop (no known end): only a step counts, and the 600 + 700 rows
    # since the change hold one, so the scan finds it; with the rows of one concept only, nothing.
    assert later_change(daemon.cfg, daemon.store, daemon.champion, trained - 1, lambda v: None) is None


def test_a_champion_that_holds_its_own_figure_has_no_later_change(home):
    daemon, traffic = home
    since = traffic.t
    traffic.send(600, 67)
    trained = traffic.t
    traffic.send(1200, 68)
    assert later_change(daemon.cfg, daemon.store, daemon.champion, since - 1, lambda v: trained) is None
