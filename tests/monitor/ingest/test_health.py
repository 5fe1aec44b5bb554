"""Readiness: named checks with reasons, fresh for /readyz, never blocking a scrape."""
from __future__ import annotations

import threading
import time

from monitor.errors import Outage, StoreError
from monitor.ingest.health import Failure, Readiness
from tests.support.waiting import wait_until


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_reasons_fresh_answers_and_a_scrape_that_does_not_wait():
    clock, gate, state = Clock(), threading.Event(), {"fail": False}
    gate.set()

    def store() -> None:
        gate.wait(10)
        if state["fail"]:
            raise StoreError("database is locked", kind=Outage.LOCKED)

    readiness = Readiness({"store": store}, ttl=2.0, clock=clock)
    assert readiness.ok("store") is True and readiness.ok("missing") is None
    state["fail"] = True
    # /readyz asks afresh
    assert readiness.results(max_age=0) == {"store": Failure(Outage.LOCKED, "database is locked")}
    state["fail"] = False
    gate.clear()  # the check now hangs, as on a locked store
    clock.t = 5.0
    started = time.monotonic()
    assert readiness.ok("store") is False  # the last answer, at once; a refresh runs behind
    assert time.monotonic() - started < 5.0  # not the hung check's 10 s (a margin for a loaded machine)
    gate.set()
    wait_until(lambda: readiness.ok("store") is True, 5, 0.01, "the background refresh never landed")
