"""The incident lifecycle's table (monitor/daemon/decisions/lifecycle.py) cannot stall: every
state but the terminal ones has an exit, every state is reachable from an opening one, every move
in the table is taken by a real IncidentStore on SQLite (and every move not in it is refused).
The docs' diagram is checked against the table in tests/docs/test_lifecycle_diagram.py."""
from __future__ import annotations

from collections import deque

import pytest

from monitor.daemon.decisions import lifecycle
from monitor.daemon.decisions.kinds import OPENING_STATES, PERFORMANCE_REASONS, Reason, State
from monitor.daemon.decisions.lifecycle import TABLE, TERMINAL, Event, IllegalTransition
from monitor.daemon.state.incidents import IncidentStore, TransitionError
from monitor.config import RULE_METRICS


def test_every_state_but_the_terminal_ones_has_an_exit_and_every_state_is_reachable():
    for state in State:
        assert bool(lifecycle.exits(state)) != (state in TERMINAL), state
    assert lifecycle.reachable() == set(State)


def test_every_open_state_resolves_and_can_retrain_again():
    for state in State:
        if not state.is_open:
            continue
        exits = lifecycle.exits(state)
        if state is State.RETRAINING:  # a running retrain ends in an outcome first
            assert set(exits.values()) == {State.PROMOTED, State.REJECTED, State.FAILED, State.SHADOW}
            continue
        assert exits[Event.RESOLVE] is State.RESOLVED, state
        assert exits[Event.START_RETRAIN] is State.RETRAINING, state


def test_the_vocabulary_is_defined_once():
    assert tuple(PERFORMANCE_REASONS) == RULE_METRICS
    assert all(isinstance(r, str) and Reason(str(r)) is r for r in Reason)  # stored as the same words
    assert State("promoted") is State.PROMOTED and f"{State.PROMOTED}" == "promoted"


def _path_to(target: State) -> list[Event]:
    """The shortest list of events from an opening state (firing first) to ``target``."""
    start = {s: [] for s in OPENING_STATES}
    todo, seen = deque(start.items()), dict(start)
    while todo:
        state, path = todo.popleft()
        if state == target:
            return path
        for event, nxt in lifecycle.exits(state).items():
            if nxt not in seen:
                seen[nxt] = path + [event]
                todo.append((nxt, path + [event]))
    raise AssertionError(f"{target} unreachable")


def _opened_in(target: State) -> State:
    path = _path_to(target)
    for s in OPENING_STATES:  # which opening state the path starts from
        state = s
        try:
            for e in path:
                state = lifecycle.step(state, e)[0]
        except IllegalTransition:
            continue
        if state == target:
            return s
    raise AssertionError(target)


def test_every_move_in_the_table_is_taken_by_the_store_and_every_other_is_refused(engine, clock):
    store = IncidentStore(engine, "demo", clock)
    taken: set[tuple[State, Event]] = set()
    for state in State:
        for event in Event:
            inc = store.open("accuracy", "alert", "breach", state=_opened_in(state))
            for e in _path_to(state):
                store.apply(inc.id, e, "on the way")
            assert store.get(inc.id).state == state
            if (state, event) in TABLE:
                moved, effect = store.apply(inc.id, event, f"{event} from {state}")
                assert (moved.state, effect) == TABLE[(state, event)]
                assert store.events(inc.id)[-1]["kind"] == moved.state
                taken.add((state, event))
            else:
                with pytest.raises(TransitionError, match=f"that is {state} cannot {event}"):
                    store.apply(inc.id, event, "refused")
                assert store.get(inc.id).state == state
    assert taken == set(TABLE)
