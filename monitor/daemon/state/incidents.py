"""Incidents: the persisted state machine, and their event trail.

Which moves exist is one table, :data:`monitor.daemon.decisions.lifecycle.TABLE` (state x event ->
new state + effect; its diagram is in docs/parts/lifecycle.md): :meth:`IncidentStore.apply` sends
an event and raises :class:`TransitionError` for a move the table does not have.
``suspected``: the estimate from the scores alone (no labels yet) shows a drop with its band clear
of the threshold; it alerts but retrains only with ``alerts.retrain_on_estimate``.
``waiting``: a breach stands but a retrain must wait (its ``detail`` says for what).
Every open state has an exit driven by new evidence (see docs/parts/lifecycle.md), and an
incident that stays unrecovered after ``alerts.max_attempts`` tries in a row is *escalated*
(flag, metric, alert) while it keeps going.

Every transition is a conditional ``UPDATE ... WHERE state = (the state it was read in)``, so two
writers (the scheduler thread, an API request, the retrain supervisor) can never both move
the same incident; the loser gets :class:`TransitionError`.
"""
from __future__ import annotations

import json
import logging
import re
import uuid
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable

from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Connection, Engine

from monitor.daemon.decisions.kinds import OPENING_STATES, Reason, State
from monitor.daemon.decisions.lifecycle import Effect, Event, IllegalTransition, event_to, exits, step
from monitor.daemon.state.events import event_data, event_message
from monitor.daemon.state.tables import incident_events, incidents
from monitor.store.engine import write_transaction

log = logging.getLogger(__name__)

STATES: tuple[State, ...] = tuple(State)
OPEN_STATES: tuple[State, ...] = tuple(s for s in State if s.is_open)
OUTCOME_STATES: tuple[State, ...] = (State.PROMOTED, State.REJECTED, State.FAILED)
# Where each state may go (read from the lifecycle's table).
TRANSITIONS: dict[State, tuple[State, ...]] = {s: tuple(dict.fromkeys(exits(s).values())) for s in State}
# Events that mark a state change; notes are deduplicated and coalesced between two of them.
_STATE_EVENTS = ("opened", *STATES)
MAX_NOTES_PER_INCIDENT = 200
REASONS: tuple[Reason, ...] = tuple(Reason)
# A per-class rule's breach (alerts.rules {metric: recall, class: night}) opens an incident named
# after its key, recall[night]: one of the model's classes, so the set stays bounded.
_CLASS_REASON = re.compile(r"^(precision|recall)\[[^\]]+\]$")


def known_reason(reason: str) -> bool:
    return reason in REASONS or bool(_CLASS_REASON.match(reason))


class TransitionError(IllegalTransition):
    """The incident is not in a state this event may move it from (or does not exist)."""


@dataclass
class Incident:
    id: str
    model: str
    reason: str
    trigger: str
    state: State
    detail: str | None
    opened_at: float
    updated_at: float
    resolved_at: float | None
    check_id: int | None
    report_paths: list[str]
    window_start: float | None
    retrain: bool
    attempts: int
    run_id: str | None
    version: str | None
    outcome_reasons: list[str]
    change_ts: float | None = None
    reference_accuracy: float | None = None
    reference_roc_auc: float | None = None
    escalated: bool = False
    drifted_checks: int = 0        # drifted checks of the drift episode it stands for (one drift, one incident)
    waits_for: str | None = None   # waiting: the WaitKind it waits for (a retrain slot, rows, ...); None otherwise

    @property
    def is_open(self) -> bool:
        return self.state.is_open

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _incident(row) -> Incident:
    m = dict(row._mapping)
    m["report_paths"] = json.loads(m["report_paths"] or "[]")
    m["outcome_reasons"] = json.loads(m["outcome_reasons"] or "[]")
    m["retrain"] = bool(m["retrain"])
    m["state"] = State(m["state"])
    m["escalated"] = bool(m.get("escalated") or False)
    m["drifted_checks"] = int(m.get("drifted_checks") or 0)
    return Incident(**m)


class IncidentStore:
    def __init__(self, engine: Engine, model: str, clock: Callable[[], float]):
        self._engine = engine
        self._model = model
        self._clock = clock
        # Told each incident a move ended (resolved: healthy, cleared, by a person, at start-up), however
        # it was moved. The fleet registers what must not outlive it (the model's retrain queue place).
        self.on_end: list[Callable[[Incident], None]] = []

    def open(self, reason: str, trigger: str, detail: str, *, check_id: int | None = None,
             report_paths: Iterable[str] = (), window_start: float | None = None,
             retrain: bool = True, change_ts: float | None = None,
             reference: tuple[float | None, float | None] = (None, None), state: State = State.FIRING,
             data: dict[str, Any] | None = None, drifted_checks: int = 0) -> Incident:
        if not known_reason(reason):
            raise ValueError(f"unknown incident reason {reason!r}")
        if state not in OPENING_STATES:
            raise ValueError(f"an incident opens as one of {OPENING_STATES}, not {state!r}")
        detail = event_message(detail)
        now = self._clock()
        incident_id = "inc-" + uuid.uuid4().hex[:12]
        with write_transaction(self._engine) as conn:
            conn.execute(insert(incidents).values(
                id=incident_id, model=self._model, reason=reason, trigger=trigger, state=state,
                detail=detail, opened_at=now, updated_at=now, check_id=check_id,
                report_paths=json.dumps(list(report_paths)), window_start=window_start, retrain=retrain,
                attempts=0, outcome_reasons="[]", change_ts=change_ts, reference_accuracy=reference[0],
                reference_roc_auc=reference[1], escalated=False, drifted_checks=drifted_checks))
            conn.execute(insert(incident_events).values(
                incident_id=incident_id, ts=now, kind="opened", message=detail,
                data=event_data({"reason": reason, "trigger": trigger, "check_id": check_id, "state": state,
                                 **(data or {})})))
        return self.get(incident_id)

    def get(self, incident_id: str) -> Incident:
        with self._engine.connect() as conn:
            row = conn.execute(select(incidents).where(incidents.c.id == incident_id,
                                                       incidents.c.model == self._model)).first()
        if row is None:  # another model's incident (one store, many models) is not this one's
            raise TransitionError(f"no incident {incident_id!r} of model {self._model!r}")
        return _incident(row)

    def open_incidents(self) -> list[Incident]:
        q = (select(incidents).where(incidents.c.model == self._model, incidents.c.state.in_(OPEN_STATES))
             .order_by(incidents.c.opened_at))
        with self._engine.connect() as conn:
            return [_incident(r) for r in conn.execute(q)]

    def current(self) -> Incident | None:
        """The oldest open incident: new alerts attach to it rather than opening another."""
        found = self.open_incidents()
        return found[0] if found else None

    def last_resolved(self, reason: str) -> Incident | None:
        """The resolved incident of ``reason`` touched last (resolved, or a drift counted on it since)."""
        q = (select(incidents).where(incidents.c.model == self._model, incidents.c.reason == reason,
                                     incidents.c.state == State.RESOLVED)
             .order_by(incidents.c.updated_at.desc()).limit(1))
        with self._engine.connect() as conn:
            row = conn.execute(q).first()
        return _incident(row) if row is not None else None

    def count_drifted(self, incident_id: str, add: int = 1) -> Incident:
        """Count ``add`` more drifted checks on the incident's drift episode; ``updated_at`` moves, so
        a drift that goes on keeps its (even resolved) incident recent."""
        with write_transaction(self._engine) as conn:
            conn.execute(update(incidents).where(incidents.c.id == incident_id)
                         .values(drifted_checks=incidents.c.drifted_checks + add, updated_at=self._clock()))
        return self.get(incident_id)

    def recent(self, limit: int = 20) -> list[Incident]:
        q = (select(incidents).where(incidents.c.model == self._model)
             .order_by(incidents.c.opened_at.desc()).limit(limit))
        with self._engine.connect() as conn:
            return [_incident(r) for r in conn.execute(q)]

    def apply(self, incident_id: str, event: Event, message: str, *, conn: Connection | None = None,
              **fields: Any) -> tuple[Incident, Effect]:
        """Send ``event`` to ``incident_id``: move it as the lifecycle's table says (one write with
        its event row) and return it with the move's effect. The incident's ``detail`` (what it is
        doing or waiting for now) becomes ``message`` unless the caller gives one: a detail never
        outlives the state it described. ``fields``: run_id, version, outcome_reasons, detail, waits_for, data.
        ``conn``: write in the caller's transaction (a decision that writes another table too)."""
        if conn is not None:
            return self._ended(*self._move_in(conn, incident_id, lambda state: event, message, fields))
        with write_transaction(self._engine) as own:
            moved = self._move_in(own, incident_id, lambda state: event, message, fields)
        return self._ended(*moved)

    def transition(self, incident_id: str, to: State | str, message: str, **fields: Any) -> Incident:
        """Move ``incident_id`` to the state ``to`` by the table's event for that move."""
        if to not in STATES:
            raise ValueError(f"unknown incident state {to!r}")
        with write_transaction(self._engine) as conn:
            moved = self._move_in(conn, incident_id, lambda state: event_to(state, to), message, fields)
        return self._ended(*moved)[0]

    def _ended(self, incident: Incident, effect: Effect) -> tuple[Incident, Effect]:
        """Tell :attr:`on_end` when the move ended ``incident``; a listener's error is logged, not raised
        (the move is written)."""
        if incident.state == State.RESOLVED:  # where an incident ends (the lifecycle's ENDS)
            for notify in self.on_end:
                try:
                    notify(incident)
                except Exception:
                    log.exception("incident %s: a listener of its end failed", incident.id)
        return incident, effect

    def _move_in(self, conn: Connection, incident_id: str, event_for: Callable[[State], Event], message: str,
                 fields: dict[str, Any]) -> tuple[Incident, Effect]:
        now = self._clock()
        message = event_message(message)
        row = conn.execute(select(incidents.c.state).where(incidents.c.id == incident_id)).first()
        if row is None:
            raise TransitionError(f"incident {incident_id} does not exist")
        state = State(row.state)
        try:
            event = event_for(state)
            to, effect = step(state, event)
        except IllegalTransition as exc:
            raise TransitionError(f"incident {incident_id}: {exc}") from None
        values: dict[str, Any] = {"state": to, "updated_at": now}
        if to == State.RESOLVED:
            values["resolved_at"] = now
        elif state == State.RESOLVED:  # reopened: open again, its history kept
            values["resolved_at"] = None
        if to == State.RETRAINING:
            values["attempts"] = incidents.c.attempts + 1
        for key in ("run_id", "version"):
            if key in fields:
                values[key] = fields[key]
        values["detail"] = event_message(fields.get("detail", message))
        values["waits_for"] = fields.get("waits_for")  # like the detail, a wait never outlives its state
        if "outcome_reasons" in fields:
            values["outcome_reasons"] = json.dumps(list(fields["outcome_reasons"]))
        done = conn.execute(update(incidents).where(incidents.c.id == incident_id, incidents.c.state == state)
                            .values(**values)).rowcount
        if done != 1:  # another writer moved it between the read and the write
            raise TransitionError(f"incident {incident_id} moved meanwhile; cannot {event} it")
        conn.execute(insert(incident_events).values(
            incident_id=incident_id, ts=now, kind=to, message=message,
            data=event_data(fields.get("data"))))
        moved = conn.execute(select(incidents).where(incidents.c.id == incident_id)).first()
        return _incident(moved), effect

    UPDATABLE = frozenset({"reason", "retrain", "change_ts", "escalated", "report_paths", "detail", "waits_for"})

    def update(self, incident_id: str, kind: str, message: str, **values: Any) -> Incident:
        """Change an open incident's facts without moving its state (its reason follows the evidence,
        a later change point, escalation), with an event saying why."""
        self.set_fields(incident_id, _event=(kind, message), **values)
        return self.get(incident_id)

    def set_fields(self, incident_id: str, *, _event: tuple[str, str] | None = None, **values: Any) -> None:
        """Change an incident's facts in place; an event only through :meth:`update` (kept report
        paths and a waiting incident's newest count are storage details, not events)."""
        unknown = set(values) - self.UPDATABLE
        if unknown:
            raise ValueError(f"cannot update incident field(s) {sorted(unknown)}")
        if "reason" in values and not known_reason(values["reason"]):
            raise ValueError(f"unknown incident reason {values['reason']!r}")
        if "report_paths" in values:
            values["report_paths"] = json.dumps(list(values["report_paths"]))
        if "detail" in values:
            values["detail"] = event_message(values["detail"])
        now = self._clock()
        with write_transaction(self._engine) as conn:
            conn.execute(update(incidents).where(incidents.c.id == incident_id).values(**values, updated_at=now))
            if _event is not None:
                conn.execute(insert(incident_events).values(
                    incident_id=incident_id, ts=now, kind=_event[0], message=event_message(_event[1]),
                    data=event_data({k: v for k, v in values.items() if k != "report_paths"})))

    def set_retrain(self, incident_id: str) -> None:
        """Mark an incident as asking for a retrain (a drift incident later confirmed by performance)."""
        with write_transaction(self._engine) as conn:
            conn.execute(update(incidents).where(incidents.c.id == incident_id)
                         .values(retrain=True, updated_at=self._clock()))

    def note(self, incident_id: str, kind: str, message: str, data: Any = None, *, dedupe: bool = False,
             coalesce: bool = False) -> None:
        """Record something that happened to an incident without changing its state.

        Notes are bounded per incident: ``dedupe`` skips one whose kind and message were already
        noted since the incident last changed state (a wait repeated every check or delivery);
        ``coalesce`` folds it into the note of the same kind since then, counting it
        (``data.count``, ``data.last_ts``; an alert flood stays one row). Past
        ``MAX_NOTES_PER_INCIDENT`` rows every note coalesces."""
        message = event_message(message)
        now = self._clock()
        e = incident_events
        with write_transaction(self._engine) as conn:
            since = conn.execute(select(func.coalesce(func.max(e.c.id), 0))
                                 .where(e.c.incident_id == incident_id, e.c.kind.in_(_STATE_EVENTS))).scalar_one()
            recent = (select(e.c.id, e.c.message, e.c.data)
                      .where(e.c.incident_id == incident_id, e.c.kind == kind, e.c.id >= since))
            if dedupe and conn.execute(recent.where(e.c.message == message).limit(1)).first() is not None:
                return
            if not coalesce:
                total = conn.execute(select(func.count()).select_from(e)
                                     .where(e.c.incident_id == incident_id)).scalar_one()
                coalesce = total >= MAX_NOTES_PER_INCIDENT
            if coalesce:
                last = conn.execute(recent.order_by(e.c.id.desc()).limit(1)).first()
                if last is not None:
                    old = json.loads(last.data) if last.data else {}
                    old = old if isinstance(old, dict) else {"data": old}
                    merged = {**old, **(data if isinstance(data, dict) else {"data": data} if data is not None else {}),
                              "count": int(old.get("count", 1)) + 1, "last_ts": now}
                    conn.execute(update(e).where(e.c.id == last.id).values(message=message, data=event_data(merged)))
                    return
            conn.execute(insert(e).values(
                incident_id=incident_id, ts=now, kind=kind, message=message, data=event_data(data)))

    def events(self, incident_id: str) -> list[dict[str, Any]]:
        q = select(incident_events).where(incident_events.c.incident_id == incident_id).order_by(incident_events.c.id)
        with self._engine.connect() as conn:
            return [{**dict(r._mapping), "data": json.loads(r.data) if r.data else None} for r in conn.execute(q)]

    def count_open(self) -> int:
        q = select(func.count()).select_from(incidents).where(
            incidents.c.model == self._model, incidents.c.state.in_(OPEN_STATES))
        with self._engine.connect() as conn:
            return int(conn.execute(q).scalar_one())

    def totals_by_reason(self) -> dict[str, int]:
        q = (select(incidents.c.reason, func.count()).where(incidents.c.model == self._model)
             .group_by(incidents.c.reason))
        with self._engine.connect() as conn:
            return {r: int(n) for r, n in conn.execute(q)}
