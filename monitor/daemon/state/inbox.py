"""Alertmanager deliveries a follower took for the model's leader, held in the shared store.

Several ``driftloop serve`` on one PostgreSQL store each lead some of the models. Alertmanager
sends its webhook to one of them (a load balancer, or one URL for the fleet's ``/v1/alerts``),
and that daemon may not lead every model the alerts concern: it cannot act for those (only a
model's leader opens incidents and retrains), and answering 503 would have Alertmanager re-send
for ever where no daemon leads every model. So a follower writes the alerts concerning a model it
does not lead here, answers 200, and the model's leader takes them within ``INBOX_SECONDS``
(:meth:`AlertInbox.pending`, then :meth:`AlertInbox.done` once acted upon: a leader that dies
between the two leaves the row for the next one, and the delivery ledger knows a repeat).

A model's inbox holds at most ``MAX_PENDING`` deliveries (a model no daemon leads); past it a
follower answers 503 and Alertmanager re-sends later. Rows older than ``KEEP_SECONDS`` are dropped.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from sqlalchemy import delete, func, insert, select
from sqlalchemy.engine import Engine

from monitor.daemon.state.tables import alert_inbox
from monitor.errors import UnavailableError
from monitor.store.engine import write_transaction

INBOX_SECONDS = 5.0   # how often a leader looks for deliveries a follower took for it
MAX_PENDING = 1000    # deliveries waiting per model before a follower answers 503
KEEP_SECONDS = 86_400  # a delivery nobody took in a day is dropped (Alertmanager re-sends what still fires)


class InboxFullError(UnavailableError):
    """The model's inbox holds ``MAX_PENDING`` deliveries no leader has taken (answered 503)."""


@dataclass(frozen=True)
class Delivery:
    id: int
    received_at: float
    payload: dict[str, Any]   # the webhook payload, its alerts those concerning the model


class AlertInbox:
    def __init__(self, engine: Engine, model: str, clock: Callable[[], float]):
        self._engine = engine
        self._model = model
        self._clock = clock

    def put(self, payload: dict[str, Any]) -> int:
        """Hold one delivery for the model's leader; returns its id. Raises :class:`InboxFullError`."""
        t = alert_inbox
        now = self._clock()
        with write_transaction(self._engine) as conn:
            conn.execute(delete(t).where(t.c.model == self._model, t.c.received_at < now - KEEP_SECONDS))
            waiting = conn.execute(select(func.count()).select_from(t).where(t.c.model == self._model)).scalar_one()
            if waiting >= MAX_PENDING:
                raise InboxFullError(f"{waiting} Alertmanager deliveries for model {self._model!r} wait for its "
                                     "leader, which has not taken them: is any daemon leading it? (GET /v1/models)")
            row = conn.execute(insert(t).values(model=self._model, received_at=now,
                                                payload=json.dumps(payload, separators=(",", ":"))))
            key = row.inserted_primary_key
            assert key is not None  # an INSERT of one row
            return int(key[0])

    def pending(self, limit: int = 100) -> list[Delivery]:
        """The oldest deliveries waiting, in the order they arrived."""
        t = alert_inbox
        q = (select(t.c.id, t.c.received_at, t.c.payload).where(t.c.model == self._model)
             .order_by(t.c.id).limit(limit))
        with self._engine.connect() as conn:
            rows = conn.execute(q).all()
        return [Delivery(int(r.id), float(r.received_at), json.loads(r.payload)) for r in rows]

    def done(self, delivery_id: int) -> None:
        t = alert_inbox
        with write_transaction(self._engine) as conn:
            conn.execute(delete(t).where(t.c.id == delivery_id, t.c.model == self._model))

    def backlog(self) -> tuple[int, float]:
        """(deliveries waiting, seconds the oldest has waited; 0 when none)."""
        t = alert_inbox
        q = select(func.count(), func.min(t.c.received_at)).where(t.c.model == self._model)
        with self._engine.connect() as conn:
            n, oldest = conn.execute(q).one()
        return int(n), (max(0.0, self._clock() - float(oldest)) if oldest is not None else 0.0)

    def count(self) -> int:
        t = alert_inbox
        with self._engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(t).where(t.c.model == self._model)).scalar_one())
