import threading
import time
from datetime import timezone

from monitor.daemon.runtime.scheduler import build_scheduler


def test_jobs_survive_their_errors_and_never_overlap():
    calls, errors, running, overlaps = [], [], [0], [0]
    done = threading.Event()

    def check():
        running[0] += 1
        overlaps[0] = max(overlaps[0], running[0])
        calls.append(time.monotonic())
        time.sleep(0.15)  # longer than the interval: runs must not pile up
        running[0] -= 1
        if len(calls) >= 4:
            done.set()
        raise RuntimeError("the store went away")

    scheduler = build_scheduler(check=check, check_interval=0.05, retention=lambda: None,
                                on_check_error=errors.append, first_check_delay=0.0)
    scheduler.start()
    try:
        assert done.wait(30)
    finally:
        scheduler.shutdown(wait=True)
    assert overlaps[0] == 1 and len(errors) >= 3 and isinstance(errors[0], RuntimeError)


def test_retrain_cron_is_scheduled_in_utc():
    scheduler = build_scheduler(check=lambda: None, check_interval=60, retention=lambda: None,
                                retrain=lambda: None, retrain_cron="0 3 * * *")
    scheduler.start(paused=True)
    try:
        job = scheduler.get_job("retrain")
        assert job is not None and "0 3 * * * UTC" in job.name
        nxt = job.next_run_time.astimezone(timezone.utc)
        assert (nxt.hour, nxt.minute) == (3, 0)
        assert {j.id for j in scheduler.get_jobs()} == {"check", "retention", "retrain"}
        assert all(j.max_instances == 1 and j.coalesce for j in scheduler.get_jobs())
    finally:
        scheduler.shutdown(wait=False)
    without = build_scheduler(check=lambda: None, check_interval=60, retention=lambda: None)
    assert {j.id for j in without.get_jobs()} == {"check", "retention"}
