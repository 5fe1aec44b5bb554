"""Retrain attempts: one row per launched retrain, written *before* the child starts.

The row is what makes a restart safe: a daemon that dies mid-retrain finds an attempt still
``running`` on start-up (or on taking over as the leader) and settles it (see
:mod:`monitor.daemon.retraining.recovery` and :mod:`monitor.daemon.retraining.failover`). The database
also enforces single-flight: a unique partial index allows one running attempt per model, so
a second :meth:`AttemptStore.begin` raises :class:`BusyError` even from another process.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass
from typing import Any, Callable

from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from monitor.daemon.decisions.kinds import Outcome
from monitor.daemon.state.events import event_message
from monitor.daemon.state.tables import retrain_attempts
from monitor.errors import DriftloopError
from monitor.store.engine import write_transaction

# "shadow": the challenger passed the gate and is held in shadow (trainer/shadow.py); the attempt is
# settled again as promoted or rejected when the shadow ends (:meth:`AttemptStore.end_shadow`).
# "interrupted": its daemon died under it (a leader killed mid-retrain). Not a failure of training,
# so it counts toward neither the cooldown nor the back-off (monitor.daemon.retraining.failover).
OUTCOMES: tuple[Outcome, ...] = tuple(o for o in Outcome if o is not Outcome.RUNNING)


class BusyError(DriftloopError):
    """A retrain is already running (single-flight)."""


@dataclass
class Attempt:
    id: str
    model: str
    incident_id: str
    trigger: str
    status: Outcome
    started_at: float
    finished_at: float | None
    pid: int | None
    rows: int | None
    data_window: dict | None
    run_id: str | None
    challenger_version: str | None
    champion_version: str | None
    duration_seconds: float | None
    samples_per_second: float | None
    reasons: list[str]
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _attempt(row) -> Attempt:
    m = dict(row._mapping)
    m["data_window"] = json.loads(m["data_window"]) if m["data_window"] else None
    m["reasons"] = json.loads(m["reasons"] or "[]")
    m["status"] = Outcome(m["status"])
    return Attempt(**m)


class AttemptStore:
    def __init__(self, engine: Engine, model: str, clock: Callable[[], float]):
        self._engine = engine
        self._model = model
        self._clock = clock

    def begin(self, incident_id: str, trigger: str, rows: int | None = None,
              data_window: dict | None = None) -> Attempt:
        attempt_id = "att-" + uuid.uuid4().hex[:12]
        try:
            with write_transaction(self._engine) as conn:
                conn.execute(insert(retrain_attempts).values(
                    id=attempt_id, model=self._model, incident_id=incident_id, trigger=trigger,
                    status=Outcome.RUNNING, started_at=self._clock(), rows=rows,
                    data_window=json.dumps(data_window) if data_window else None, reasons="[]"))
        except IntegrityError as exc:
            running = self.running()
            raise BusyError(f"a retrain is already running ({running.id if running else 'unknown'})") from exc
        return self.get(attempt_id)

    def set_pid(self, attempt_id: str, pid: int) -> None:
        with write_transaction(self._engine) as conn:
            conn.execute(update(retrain_attempts).where(retrain_attempts.c.id == attempt_id).values(pid=pid))

    def finish(self, attempt_id: str, status: str, *, run_id: str | None = None,
               challenger_version: str | None = None, champion_version: str | None = None,
               duration_seconds: float | None = None, samples_per_second: float | None = None,
               reasons: list[str] | None = None, error: str | None = None,
               conn: Connection | None = None) -> Attempt:
        """Settle a running attempt. Settling one twice (a late child result after recovery
        already settled it) raises ``ValueError``: the first word stands. ``conn``: write in the
        caller's transaction (the controller moves the incident in the same one)."""
        if status not in OUTCOMES:
            raise ValueError(f"unknown attempt outcome {status!r}")
        values = dict(status=status, finished_at=self._clock(), run_id=run_id, challenger_version=challenger_version,
                      champion_version=champion_version, duration_seconds=duration_seconds,
                      samples_per_second=samples_per_second, reasons=json.dumps(reasons or []),
                      error=event_message(error) if error is not None else None)  # a traceback's length at most
        running = (retrain_attempts.c.id == attempt_id, retrain_attempts.c.status == Outcome.RUNNING)
        if conn is not None:
            done = conn.execute(update(retrain_attempts).where(*running).values(**values)).rowcount
        else:
            with write_transaction(self._engine) as own:
                done = own.execute(update(retrain_attempts).where(*running).values(**values)).rowcount
        if done != 1:
            raise ValueError(f"attempt {attempt_id} is not running")
        if conn is not None:
            return _attempt(conn.execute(select(retrain_attempts).where(retrain_attempts.c.id == attempt_id)).one())
        return self.get(attempt_id)

    def end_shadow(self, version: str, status: Outcome, reason: str, conn: Connection | None = None) -> Attempt | None:
        """Settle the attempt whose challenger ``version`` was held in shadow as ``promoted`` or
        ``rejected`` (the shadow's verdict on live traffic), adding ``reason``. None when no attempt
        of this model holds ``version`` in shadow (already settled, or the shadow came from a
        retrain run outside the daemon). ``conn``: write in the caller's transaction."""
        if conn is None:
            with write_transaction(self._engine) as own:
                return self.end_shadow(version, status, reason, own)
        if status not in (Outcome.PROMOTED, Outcome.REJECTED):
            raise ValueError(f"a shadow ends promoted or rejected, not {status!r}")
        q = select(retrain_attempts).where(retrain_attempts.c.model == self._model,
                                           retrain_attempts.c.status == Outcome.SHADOW,
                                           retrain_attempts.c.challenger_version == str(version))
        row = conn.execute(q).first()
        if row is None:
            return None
        held = _attempt(row)
        conn.execute(update(retrain_attempts)
                     .where(retrain_attempts.c.id == held.id, retrain_attempts.c.status == Outcome.SHADOW)
                     .values(status=status, finished_at=self._clock(),
                             champion_version=str(version) if status == Outcome.PROMOTED else held.champion_version,
                             reasons=json.dumps([*held.reasons, reason])))
        return _attempt(conn.execute(select(retrain_attempts).where(retrain_attempts.c.id == held.id)).one())

    def in_shadow(self) -> Attempt | None:
        """The latest attempt whose challenger is still held in shadow."""
        q = (select(retrain_attempts).where(retrain_attempts.c.model == self._model,
                                            retrain_attempts.c.status == Outcome.SHADOW)
             .order_by(retrain_attempts.c.started_at.desc()).limit(1))
        with self._engine.connect() as conn:
            row = conn.execute(q).first()
        return _attempt(row) if row else None

    def get(self, attempt_id: str) -> Attempt:
        with self._engine.connect() as conn:
            row = conn.execute(select(retrain_attempts).where(retrain_attempts.c.id == attempt_id,
                                                              retrain_attempts.c.model == self._model)).first()
        if row is None:
            raise KeyError(attempt_id)
        return _attempt(row)

    def running(self) -> Attempt | None:
        q = select(retrain_attempts).where(retrain_attempts.c.model == self._model,
                                           retrain_attempts.c.status == Outcome.RUNNING)
        with self._engine.connect() as conn:
            row = conn.execute(q).first()
        return _attempt(row) if row else None

    def recent(self, limit: int = 10) -> list[Attempt]:
        q = (select(retrain_attempts).where(retrain_attempts.c.model == self._model)
             .order_by(retrain_attempts.c.started_at.desc()).limit(limit))
        with self._engine.connect() as conn:
            return [_attempt(r) for r in conn.execute(q)]

    def returned_at(self, version: str) -> float | None:
        """When ``version`` became champion again (None in its first tenure): checks and
        recalibration judge a reinstated champion on the rows it served since."""
        return returned_at(self.recent(50), version)

    def for_incident(self, incident_id: str) -> list[Attempt]:
        q = (select(retrain_attempts).where(retrain_attempts.c.incident_id == incident_id,
                                            retrain_attempts.c.model == self._model)
             .order_by(retrain_attempts.c.started_at))
        with self._engine.connect() as conn:
            return [_attempt(r) for r in conn.execute(q)]

    def last_finished(self) -> Attempt | None:
        q = (select(retrain_attempts).where(retrain_attempts.c.model == self._model,
                                            retrain_attempts.c.finished_at.is_not(None))
             .order_by(retrain_attempts.c.finished_at.desc()).limit(1))
        with self._engine.connect() as conn:
            row = conn.execute(q).first()
        return _attempt(row) if row else None

    def last_with_status(self) -> dict[str, float]:
        """Finish time of the latest attempt per outcome."""
        q = (select(retrain_attempts.c.status, func.max(retrain_attempts.c.finished_at))
             .where(retrain_attempts.c.model == self._model, retrain_attempts.c.finished_at.is_not(None))
             .group_by(retrain_attempts.c.status))
        with self._engine.connect() as conn:
            return {s: float(t) for s, t in conn.execute(q)}

    def totals_by_outcome(self) -> dict[str, int]:
        q = (select(retrain_attempts.c.status, func.count()).where(retrain_attempts.c.model == self._model,
                                                                   retrain_attempts.c.status.in_(OUTCOMES))
             .group_by(retrain_attempts.c.status))
        with self._engine.connect() as conn:
            return {s: int(n) for s, n in conn.execute(q)}


def returned_at(attempts: list[Attempt], version: str) -> float | None:
    """Whether ``version`` is champion again (a time, else None): promoted before by the loop, older
    than the first version it promoted (its first champion), or older than the last it promoted (the
    alias moved back: a recall or reinstatement not yet settled, or a rollback)."""
    promoted = sorted(((a.started_at, str(a.challenger_version), float(a.finished_at)) for a in attempts
                       if a.status == Outcome.PROMOTED and a.challenger_version is not None
                       and a.finished_at is not None))
    if not promoted:
        return None
    mine = [p for p in promoted if p[1] == version]
    (_, last, since), first = promoted[-1], promoted[0][1]

    def older(than: str) -> bool:
        return version.isdigit() and than.isdigit() and int(version) < int(than)
    if last != version:
        return since if older(last) else None
    return since if len(mine) > 1 or (len(promoted) > 1 and older(first)) else None


def unsuccessful_in_a_row(tries: list[Attempt]) -> int:
    """Rejected or failed attempts since the last promotion (running ones not counted)."""
    n = 0
    for a in reversed(tries):
        if a.status == Outcome.PROMOTED:
            break
        if Outcome(a.status).unsuccessful:
            n += 1
    return n
