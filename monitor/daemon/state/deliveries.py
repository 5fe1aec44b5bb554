"""Alertmanager deliveries, deduplicated: the alerts seen, keyed by fingerprint and ``startsAt``.

Alertmanager re-sends a firing alert every ``repeat_interval``, retries a webhook that timed
out, and a replayed or delayed delivery can bring back a firing notification after the same
alert resolved. The ledger tells them apart:

- ``new``      first sight of (fingerprint, startsAt) firing: acted upon;
- ``repeat``   the same alert still firing, delivered again: attaches, never opens twice;
- ``replay``   a firing delivery for an alert already seen resolved: recorded, not acted upon;
- ``resolved`` a resolved delivery.

Rows are kept for ``KEEP_SECONDS`` after their last delivery (Alertmanager forgets resolved
alerts after ``resolve_timeout`` + its own retention, far sooner).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Engine

from monitor.daemon.state.tables import alert_deliveries
from monitor.store.engine import write_transaction

if TYPE_CHECKING:  # the webhook's alerts are handed in; state sits below runtime
    from monitor.daemon.runtime.alertmanager import WebhookAlert

KEEP_SECONDS = 7 * 86_400


def alert_key(alert: WebhookAlert) -> tuple[str, str]:
    """(fingerprint, startsAt): Alertmanager's identity of one firing episode of one alert."""
    fingerprint = alert.fingerprint or "labels:" + hashlib.sha256(
        json.dumps(alert.labels, sort_keys=True).encode()).hexdigest()[:32]
    return fingerprint[:200], alert.starts_at.isoformat() if alert.starts_at else ""


@dataclass(frozen=True)
class Sorted:
    new: list[WebhookAlert]
    repeat: list[WebhookAlert]
    replay: list[WebhookAlert]
    resolved: list[WebhookAlert]

    @property
    def firing(self) -> list[WebhookAlert]:
        """The firing alerts to act on (a replay of a resolved one is not among them)."""
        return self.new + self.repeat


class DeliveryLedger:
    def __init__(self, engine: Engine, model: str, clock: Callable[[], float]):
        self._engine = engine
        self._model = model
        self._clock = clock

    def sort(self, firing: list[WebhookAlert], resolved: list[WebhookAlert]) -> Sorted:
        """Record these deliveries and say which kind each is (in one transaction)."""
        now = self._clock()
        t = alert_deliveries
        out = Sorted([], [], [], list(resolved))
        with write_transaction(self._engine) as conn:
            for alert in [*firing, *resolved]:
                fingerprint, starts_at = alert_key(alert)
                where = (t.c.model == self._model, t.c.fingerprint == fingerprint, t.c.starts_at == starts_at)
                row = conn.execute(select(t.c.status).where(*where)).first()
                if row is None:
                    conn.execute(insert(t).values(
                        model=self._model, fingerprint=fingerprint, starts_at=starts_at, status=alert.status,
                        first_seen=now, last_seen=now, deliveries=1,
                        resolved_at=now if alert.status == "resolved" else None))
                    if alert.status == "firing":
                        out.new.append(alert)
                    continue
                values = {"last_seen": now, "deliveries": t.c.deliveries + 1}
                if alert.status == "resolved":
                    values["status"] = "resolved"
                    if row.status != "resolved":
                        values["resolved_at"] = now
                elif row.status == "resolved":
                    out.replay.append(alert)
                else:
                    out.repeat.append(alert)
                conn.execute(update(t).where(*where).values(**values))
            conn.execute(delete(t).where(t.c.model == self._model, t.c.last_seen < now - KEEP_SECONDS))
        return out

    def firing_since(self, since: float) -> int:
        """How many alerts for this model are firing, delivered at or after ``since`` and not resolved
        since (an incident's opening: an alert that fired before it, never resolved, is not its)."""
        t = alert_deliveries
        q = select(t.c.fingerprint).where(t.c.model == self._model, t.c.status == "firing", t.c.last_seen >= since)
        with self._engine.connect() as conn:
            return len(conn.execute(q).all())
