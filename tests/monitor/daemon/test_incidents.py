import pytest

from monitor.daemon.state.attempts import AttemptStore, BusyError
from monitor.daemon.state.incidents import IncidentStore, TransitionError


@pytest.fixture
def incidents(engine, clock):
    return IncidentStore(engine, "demo", clock)


@pytest.fixture
def attempts(engine, clock):
    return AttemptStore(engine, "demo", clock)


def test_lifecycle_is_persisted_with_events(incidents, clock, engine):
    inc = incidents.open("accuracy", "alert", "accuracy 0.80 vs 0.87", check_id=7, report_paths=["r.html"],
                         window_start=clock() - 60)
    assert inc.state == "firing" and inc.attempts == 0 and inc.report_paths == ["r.html"]
    clock.advance(5)
    incidents.transition(inc.id, "retraining", "retrain started")
    clock.advance(30)
    done = incidents.transition(inc.id, "promoted", "promoted v2", version="2", run_id="abc",
                                outcome_reasons=["accuracy +0.08"])
    assert (done.state, done.version, done.run_id, done.attempts) == ("promoted", "2", "abc", 1)
    assert done.outcome_reasons == ["accuracy +0.08"]
    resolved = incidents.transition(inc.id, "resolved", "healthy")
    assert resolved.resolved_at == clock() and not resolved.is_open
    # A second store on the same database (a restarted daemon) sees the same history.
    again = IncidentStore(engine, "demo", clock)
    assert [e["kind"] for e in again.events(inc.id)] == ["opened", "retraining", "promoted", "resolved"]
    assert again.open_incidents() == [] and again.totals_by_reason() == {"accuracy": 1}


@pytest.mark.parametrize("path,bad", [
    ((), "promoted"),                       # firing -> promoted skips the retrain
    (("retraining",), "resolved"),          # a running retrain must end first
    (("resolved",), "retraining"),          # resolved is final
])
def test_illegal_transitions_are_refused(incidents, path, bad):
    inc = incidents.open("drift", "alert", "drift")
    for state in path:
        incidents.transition(inc.id, state, "ok")
    with pytest.raises(TransitionError, match=f"cannot move it to {bad}"):
        incidents.transition(inc.id, bad, "nope")
    assert incidents.get(inc.id).state == (path[-1] if path else "firing")


def test_retry_after_failure_counts_attempts(incidents):
    inc = incidents.open("roc_auc", "alert", "auc")
    for _ in range(2):
        incidents.transition(inc.id, "retraining", "go")
        incidents.transition(inc.id, "failed", "boom")
    assert incidents.get(inc.id).attempts == 2 and incidents.count_open() == 1


def test_unknown_incident(incidents):
    with pytest.raises(TransitionError, match="does not exist"):
        incidents.transition("inc-nope", "resolved", "x")


def test_single_flight_is_enforced_by_the_database(attempts, engine, clock):
    first = attempts.begin("inc-1", "alert", rows=500)
    other_daemon = AttemptStore(engine, "demo", clock)
    with pytest.raises(BusyError, match=first.id):
        other_daemon.begin("inc-2", "manual")
    # Another model is not blocked by this one.
    AttemptStore(engine, "other-model", clock).begin("inc-3", "manual")
    clock.advance(12)
    done = attempts.finish(first.id, "rejected", challenger_version="3", reasons=["no gain"], duration_seconds=12)
    assert done.status == "rejected" and done.finished_at == clock()
    with pytest.raises(ValueError, match="not running"):
        attempts.finish(first.id, "promoted")  # the first word stands
    assert attempts.begin("inc-2", "manual").status == "running"
    assert attempts.totals_by_outcome() == {"rejected": 1}
    assert attempts.last_finished().id == first.id
