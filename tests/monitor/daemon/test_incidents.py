import pytest

from monitor.daemon.state.attempts import AttemptStore, BusyError
from monitor.daemon.decisions.kinds import State
from monitor.daemon.decisions.lifecycle import Effect, Event
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
    incidents.apply(inc.id, Event.START_RETRAIN, "retrain started")
    clock.advance(30)
    done, effect = incidents.apply(inc.id, Event.PROMOTE, "promoted v2", version="2", run_id="abc",
                                   outcome_reasons=["accuracy +0.08"])
    assert (done.state, done.version, done.run_id, done.attempts) == (State.PROMOTED, "2", "abc", 1)
    assert effect is Effect.RELOAD_CHAMPION
    assert done.outcome_reasons == ["accuracy +0.08"]
    resolved, effect = incidents.apply(inc.id, Event.RESOLVE, "healthy")
    assert effect is Effect.CLOSE
    assert resolved.resolved_at == clock() and not resolved.is_open
    # A second store on the same database (a restarted daemon) sees the same history.
    again = IncidentStore(engine, "demo", clock)
    assert [e["kind"] for e in again.events(inc.id)] == ["opened", "retraining", "promoted", "resolved"]
    assert again.open_incidents() == [] and again.totals_by_reason() == {"accuracy": 1}


@pytest.mark.parametrize("path,bad", [
    ((), Event.PROMOTE),                          # firing -> promoted skips the retrain
    ((Event.START_RETRAIN,), Event.RESOLVE),      # a running retrain must end first
    ((Event.RESOLVE,), Event.START_RETRAIN),      # resolved is final
])
def test_illegal_transitions_are_refused(incidents, path, bad):
    inc = incidents.open("drift", "alert", "drift")
    for event in path:
        incidents.apply(inc.id, event, "ok")
    before = incidents.get(inc.id).state
    with pytest.raises(TransitionError, match=f"an incident that is {before} cannot {bad}"):
        incidents.apply(inc.id, bad, "nope")
    assert incidents.get(inc.id).state == before


def test_naming_the_target_state_is_checked_against_the_same_table(incidents):
    inc = incidents.open("drift", "alert", "drift")
    with pytest.raises(TransitionError, match="an incident that is firing cannot move to promoted"):
        incidents.transition(inc.id, "promoted", "nope")
    assert incidents.transition(inc.id, "retraining", "go").state is State.RETRAINING


def test_retry_after_failure_counts_attempts(incidents):
    inc = incidents.open("roc_auc", "alert", "auc")
    for _ in range(2):
        incidents.apply(inc.id, Event.START_RETRAIN, "go")
        incidents.apply(inc.id, Event.FAIL, "boom")
    assert incidents.get(inc.id).attempts == 2 and incidents.count_open() == 1


def test_unknown_incident(incidents):
    with pytest.raises(TransitionError, match="does not exist"):
        incidents.apply("inc-nope", Event.RESOLVE, "x")


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
