"""The incident lifecycle as one table: (state, event) -> (new state, effect).

Every move of an incident goes through :func:`step` (the store,
:meth:`monitor.daemon.state.incidents.IncidentStore.apply`, applies it as one conditional write);
a pair that is not in :data:`TABLE` is an :class:`IllegalTransition`. The *effect* names what the
daemon does because of the move (reload the champion after a promotion, reset the streaks on
closing), so the controller dispatches on it instead of on the words of a message. The state
diagram of docs/parts/lifecycle.md is :func:`mermaid` of this table (a docs test checks it).

Pure: no I/O, no clock.
"""
from __future__ import annotations

from enum import StrEnum

from monitor.daemon.decisions.kinds import OPENING_STATES, Outcome, State
from monitor.errors import DriftloopError


class Event(StrEnum):
    """What happens to an incident (who sends it: docs/parts/lifecycle.md)."""

    CONFIRM = "confirm"              # labels confirm a suspected (estimated) drop
    WAIT = "wait"                    # a breach stands, but a retrain must wait (rows, cooldown, back-off)
    START_RETRAIN = "start_retrain"  # a retrain child is launched
    HOLD_SHADOW = "hold_shadow"      # the challenger passed the gate; it scores live windows first
    PROMOTE = "promote"              # the challenger became champion (at once, or after its shadow)
    REJECT = "reject"                # the gate, or the shadow's live windows, kept the champion
    FAIL = "fail"                    # the retrain errored, could not start, or its daemon died first
    RESOLVE = "resolve"              # healthy again, cleared, drift without impact, or a request done
    REOPEN = "reopen"                # the same drift is back within alerts.drift_reopen_seconds: it continues


class Effect(StrEnum):
    """What the daemon does because of a move."""

    ALERT = "alert"                      # a confirmed incident: retrain as any firing one
    WAIT = "wait"                        # say what it waits for (the incident's detail)
    LAUNCH = "launch"                    # a retrain child runs
    HOLD = "hold"                        # the challenger is in shadow
    RELOAD_CHAMPION = "reload_champion"  # drop the champion cache; the alert streaks start again
    KEEP_CHAMPION = "keep_champion"      # the next try needs new evidence (alerts.retry_rows)
    COOL_DOWN = "cool_down"              # the next try waits alerts.cooldown_seconds
    CLOSE = "close"                      # the streaks start again
    REOPEN = "reopen"                    # a resolved incident continues: the streaks start again


_S = State
_RETRY_FROM = (_S.SUSPECTED, _S.FIRING, _S.WAITING, _S.SHADOW, _S.PROMOTED, _S.REJECTED, _S.FAILED)

TABLE: dict[tuple[State, Event], tuple[State, Effect]] = {
    (_S.SUSPECTED, Event.CONFIRM): (_S.FIRING, Effect.ALERT),
    **{(s, Event.WAIT): (_S.WAITING, Effect.WAIT) for s in _RETRY_FROM if s is not _S.WAITING},
    **{(s, Event.START_RETRAIN): (_S.RETRAINING, Effect.LAUNCH) for s in _RETRY_FROM},
    (_S.RETRAINING, Event.HOLD_SHADOW): (_S.SHADOW, Effect.HOLD),
    (_S.RETRAINING, Event.PROMOTE): (_S.PROMOTED, Effect.RELOAD_CHAMPION),
    (_S.SHADOW, Event.PROMOTE): (_S.PROMOTED, Effect.RELOAD_CHAMPION),
    (_S.RETRAINING, Event.REJECT): (_S.REJECTED, Effect.KEEP_CHAMPION),
    (_S.SHADOW, Event.REJECT): (_S.REJECTED, Effect.KEEP_CHAMPION),
    (_S.RETRAINING, Event.FAIL): (_S.FAILED, Effect.COOL_DOWN),
    # A running retrain ends in an outcome first: it is never resolved under its child.
    **{(s, Event.RESOLVE): (_S.RESOLVED, Effect.CLOSE) for s in State if s.is_open and s is not _S.RETRAINING},
    # One cause, one incident: a drift that comes back soon continues its resolved incident (issue 34).
    (_S.RESOLVED, Event.REOPEN): (_S.FIRING, Effect.REOPEN),
}
# States with no exit, on purpose (none: a resolved incident may be reopened by the same cause).
TERMINAL: frozenset[State] = frozenset()
# Where an incident's story may end (the diagram's final marker).
ENDS = frozenset({State.RESOLVED})
# How a retrain attempt's outcome moves its incident (the supervisor's result, a shadow's verdict).
OUTCOME_EVENTS: dict[Outcome, Event] = {Outcome.PROMOTED: Event.PROMOTE, Outcome.REJECTED: Event.REJECT,
                                        Outcome.FAILED: Event.FAIL, Outcome.SHADOW: Event.HOLD_SHADOW}


class IllegalTransition(DriftloopError):
    """The lifecycle has no move for this event from this state."""


def step(state: State | str, event: Event) -> tuple[State, Effect]:
    """The state ``event`` moves an incident in ``state`` to, and the effect of the move."""
    found = TABLE.get((State(state), event))
    if found is None:
        allowed = sorted(e for (s, e) in TABLE if s == state)
        raise IllegalTransition(f"an incident that is {state} cannot {event} (from {state}: {', '.join(allowed)})")
    return found


def event_to(state: State | str, target: State | str) -> Event:
    """The event that moves ``state`` to ``target`` (for callers that name the target state)."""
    for (s, e), (t, _) in TABLE.items():
        if s == state and t == target:
            return e
    raise IllegalTransition(f"an incident that is {state} cannot move to {target}")


def exits(state: State) -> dict[Event, State]:
    return {e: t for (s, e), (t, _) in TABLE.items() if s == state}


def reachable() -> set[State]:
    """Every state reachable from the states an incident opens in."""
    seen = set(OPENING_STATES)
    todo = list(seen)
    while todo:
        for target in exits(todo.pop()).values():
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def mermaid() -> str:
    """The table as a Mermaid ``stateDiagram-v2`` (docs/parts/lifecycle.md holds it verbatim)."""
    lines = ["stateDiagram-v2"] + [f"    [*] --> {s}" for s in OPENING_STATES]
    edges: dict[tuple[State, State], list[str]] = {}
    for (s, e), (t, _) in TABLE.items():
        edges.setdefault((s, t), []).append(str(e))
    lines += [f"    {s} --> {t} : {', '.join(events)}" for (s, t), events in edges.items()]
    lines += [f"    {s} --> [*]" for s in State if s in ENDS]
    return "\n".join(lines)


if __name__ == "__main__":  # the diagram block of docs/parts/lifecycle.md
    print(f"```mermaid\n{mermaid()}\n```")
