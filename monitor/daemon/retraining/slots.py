"""The deployment's retrain queue: at most ``fleet.max_concurrent_retrains`` retrains at once across models.

A model whose retrain may start otherwise asks for a slot (:meth:`RetrainSlots.claim`). With a free
slot and no more urgent model waiting, it gets one; otherwise it joins the queue and its incident
waits (``WaitKind.QUEUED``). The queue is ordered by severity (a request from a person or
Alertmanager, then a performance breach, then drift and the schedule) and then by how long a model
has waited, so a model that breaches often cannot starve the others: each model holds at most one
place, and a place keeps its age. When a slot frees, ``on_free`` is told the model at the head of
the queue (the fleet runs its check at once instead of at its next interval). A place is held only
while its model's incident is open: the incident's end (healthy again, resolved by a person or
Alertmanager) or the model's removal :meth:`~RetrainSlots.forget` it, so a stale place never holds a
free slot from the models behind it (the ttl is the fallback for an end this process does not see).

Within one model retrains are single-flight already (its supervisor and the store's unique running
attempt); the slots only bound how many models retrain together.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

from monitor.daemon.decisions.kinds import Reason

# Higher first. A person's or Alertmanager's request is someone waiting for it.
REQUESTED, PERFORMANCE, DRIFT = 3, 2, 1


def slot_severity(reason: str, trigger: str) -> int:
    """How urgent a retrain for an incident of ``reason`` started by ``trigger`` is (higher first)."""
    if trigger in ("manual", "alert") or reason in (Reason.MANUAL, Reason.ALERTMANAGER):
        return REQUESTED
    try:
        return PERFORMANCE if Reason(reason.split("[")[0]).is_performance else DRIFT
    except ValueError:  # a per-class or segment key of a performance rule
        return PERFORMANCE


@dataclass(frozen=True)
class Place:
    model: str
    severity: int
    since: float
    seen: float   # the model's last claim: a place not claimed again within the ttl is dropped

    def order(self) -> tuple[int, float]:
        return -self.severity, self.since


class RetrainSlots:
    def __init__(self, limit: int, clock: Callable[[], float] = time.time, ttl: float = 3600.0):
        """``ttl``: a waiting model claims again at each of its checks; one that has not for ``ttl``
        seconds (its incident ended, its checks stopped) loses its place."""
        self.limit = limit
        self.ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._running: dict[str, float] = {}   # model → when its slot was granted
        self._queue: dict[str, Place] = {}
        self.waited: list[float] = []          # seconds each granted slot waited (read and cleared by metrics)
        self.on_free: list[Callable[[str], None]] = []

    def claim(self, model: str, level: int) -> int | None:
        """A slot for ``model`` (None: granted, or already held), or its place in the queue (1 = next)."""
        with self._lock:
            if model in self._running:
                return None
            now = self._clock()
            self._expire(now)
            old = self._queue.get(model)
            place = Place(model, max(level, old.severity) if old else level, old.since if old else now, now)
            self._queue[model] = place
            ahead = sorted(self._queue.values(), key=Place.order)
            position = ahead.index(place)
            if len(self._running) < self.limit and position < self.limit - len(self._running):
                del self._queue[model]
                self._running[model] = now
                self.waited.append(now - place.since)
                return None
            return position + 1

    def _expire(self, now: float) -> None:
        for name in [p.model for p in self._queue.values() if now - p.seen > self.ttl]:
            del self._queue[name]

    def release(self, model: str) -> None:
        """Give back ``model``'s slot (idempotent); the head of the queue is told to try again."""
        with self._lock:
            if self._running.pop(model, None) is None:
                return
            self._expire(self._clock())
            head = min(self._queue.values(), key=Place.order).model if self._queue else None
        if head is not None:
            for notify in self.on_free:
                notify(head)

    def forget(self, model: str) -> None:
        """``model`` no longer waits (its incident ended, or it left the deployment): its place goes,
        and with a slot free the new head of the queue is told to try again (as on :meth:`release`)."""
        with self._lock:
            if self._queue.pop(model, None) is None:
                return
            self._expire(self._clock())
            free = len(self._running) < self.limit
            head = min(self._queue.values(), key=Place.order).model if self._queue and free else None
        if head is not None:
            for notify in self.on_free:
                notify(head)

    def snapshot(self) -> tuple[list[str], list[Place]]:
        """The models retraining, and the queue in order."""
        with self._lock:
            self._expire(self._clock())
            return list(self._running), sorted(self._queue.values(), key=Place.order)
