"""What the models of one daemon share: the retrain queue (severity, then age) and the check pool."""
from __future__ import annotations

import threading
import time

from monitor.daemon.retraining.slots import DRIFT, PERFORMANCE, REQUESTED, RetrainSlots, slot_severity
from monitor.daemon.runtime.scheduler import SharedScheduler
from tests.monitor.daemon.conftest import Clock
from tests.support.waiting import wait_until


def test_severity_puts_requests_first_then_performance_then_drift():
    assert slot_severity("drift", "alert") == REQUESTED and slot_severity("manual", "manual") == REQUESTED
    assert slot_severity("accuracy", "schedule") == PERFORMANCE and slot_severity("recall[night]", "x") == PERFORMANCE
    assert slot_severity("mae", "policy") == PERFORMANCE
    assert slot_severity("drift", "policy") == slot_severity("schedule", "schedule") == DRIFT


def test_the_queue_is_ordered_by_severity_then_waiting_time_and_a_freed_slot_calls_the_head():
    clock = Clock(1000.0)
    slots = RetrainSlots(1, clock)
    called: list[str] = []
    slots.on_free.append(called.append)
    assert slots.claim("a", DRIFT) is None                       # free: granted
    assert slots.claim("a", DRIFT) is None                       # held: still granted
    clock.advance(1)
    assert slots.claim("noisy", DRIFT) == 1
    clock.advance(1)
    assert slots.claim("quiet", PERFORMANCE) == 1                # more severe: ahead of the older drift
    assert slots.claim("noisy", DRIFT) == 2                      # claiming again keeps its age, not its rank
    assert [p.model for p in slots.snapshot()[1]] == ["quiet", "noisy"]
    clock.advance(3)
    slots.release("a")
    assert called == ["quiet"]
    assert slots.claim("noisy", DRIFT) == 2                      # the slot is the head's, not the first to ask
    assert slots.claim("quiet", PERFORMANCE) is None
    assert slots.waited == [0.0, 3.0]                            # seconds each grant waited
    slots.release("quiet")
    slots.release("quiet")                                       # idempotent: no second call
    assert called == ["quiet", "noisy"]


def test_a_place_not_claimed_again_within_the_ttl_is_dropped():
    clock = Clock(0.0)
    slots = RetrainSlots(1, clock, ttl=100)
    slots.claim("busy", DRIFT)
    slots.claim("gone", REQUESTED)    # its incident ends and it never claims again
    clock.advance(50)
    slots.claim("later", DRIFT)
    clock.advance(60)
    slots.release("busy")
    assert slots.claim("later", DRIFT) is None  # 'gone' expired; 'later' (seen 60 s ago) kept its place


def test_two_slots_run_two_models_and_the_third_waits():
    slots = RetrainSlots(2, Clock(0.0))
    assert slots.claim("a", DRIFT) is None and slots.claim("b", DRIFT) is None
    assert slots.claim("c", REQUESTED) == 1
    assert slots.snapshot()[0] == ["a", "b"]


def test_a_slow_models_checks_do_not_starve_a_fast_one_on_one_thread():
    """One worker; model ``slow`` checks take 0.6 s every 0.2 s, ``fast`` every 0.2 s. Each model has
    at most one check queued, so ``fast`` still runs about every other slot, and its delay is bounded
    by one slow check, not by the queue of ``slow``'s missed runs."""
    jobs = SharedScheduler(workers=1)
    runs = {"slow": 0, "fast": 0}
    lock = threading.Lock()

    def check(name: str, seconds: float):
        def run() -> None:
            with lock:
                runs[name] += 1
            time.sleep(seconds)
        return run
    for name, seconds in (("slow", 0.6), ("fast", 0.0)):
        jobs.add_model(name, check=check(name, seconds), check_interval=0.2, retention=lambda: None,
                       first_check_delay=0.05)
    jobs.start()
    try:
        wait_until(lambda: runs["fast"] >= 4, 15, 0.05, lambda: f"fast ran {runs}")
    finally:
        jobs.shutdown(wait=True)
    assert runs["slow"] >= 2
    assert max(jobs.delays["fast"]) < 0.6 + 0.5, jobs.delays["fast"]


def test_models_are_added_and_removed_without_touching_the_others():
    jobs = SharedScheduler(workers=2)
    for name in ("a", "b"):
        jobs.add_model(name, check=lambda: None, check_interval=60, retention=lambda: None, retrain=lambda: None,
                       retrain_cron="0 3 * * *")
    assert sorted(jobs.jobs()) == ["a:check", "a:retention", "a:retrain", "b:check", "b:retention", "b:retrain"]
    jobs.remove_model("a")
    assert sorted(jobs.jobs()) == ["b:check", "b:retention", "b:retrain"]


def test_stop_runs_no_queued_check_and_waits_only_for_the_running_ones():
    """Six models due at once on one thread: one check runs, five wait in the pool's queue. A stop
    must not run the queued ones (the pool's own shutdown would, one after another: at 50 models that
    held SIGTERM past any supervisor's grace); it waits for the running check and returns."""
    jobs = SharedScheduler(workers=1)
    started: list[str] = []
    lock = threading.Lock()
    first = threading.Event()

    def check(name: str):
        def run() -> None:
            with lock:
                started.append(name)
            first.set()
            time.sleep(0.5)
        return run
    for i in range(6):
        jobs.add_model(f"m{i}", check=check(f"m{i}"), check_interval=60, retention=lambda: None,
                       first_check_delay=0.0)
    jobs.start()
    assert first.wait(15)
    wait_until(lambda: jobs.waiting() >= 1, 15, 0.02, lambda: f"queued {jobs.waiting()}")
    jobs.shutdown(wait=True)
    assert len(started) == 1, started           # the running check finished; none of the queued ones ran
    jobs.shutdown(wait=True)                    # a second stop is harmless
