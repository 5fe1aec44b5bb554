"""APScheduler wiring: the periodic check, daily retention and the optional retrain cron.

Every job runs with ``max_instances=1`` and ``coalesce=True``: a check that takes longer than
the interval delays the next one instead of piling up, and missed runs (a suspended laptop)
collapse into one. Jobs never raise into the scheduler: a failure is logged and counted, and
the job runs again at its next time.
"""
from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import Callable

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

log = logging.getLogger(__name__)

RETENTION_INTERVAL_SECONDS = 6 * 3600


def _guarded(name: str, fn: Callable[[], object],
             on_error: Callable[[BaseException], None] | None) -> Callable[[], None]:
    def run() -> None:
        try:
            fn()
        except Exception as exc:  # the job must run again next time, whatever happened
            log.exception("scheduled job %s failed", name)
            if on_error is not None:
                on_error(exc)
    run.__name__ = f"driftloop_{name}"
    return run


def build_scheduler(*, check: Callable[[], object], check_interval: float, retention: Callable[[], object],
                    retrain: Callable[[], object] | None = None, retrain_cron: str | None = None,
                    on_check_error: Callable[[BaseException], None] | None = None,
                    first_check_delay: float = 1.0) -> BackgroundScheduler:
    """A scheduler (not started) with the daemon's jobs. The first check runs
    ``first_check_delay`` seconds after start, so /metrics has model series right away."""
    scheduler = BackgroundScheduler(timezone=timezone.utc,
                                    job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": None})
    now = datetime.now(timezone.utc)
    scheduler.add_job(_guarded("check", check, on_check_error), IntervalTrigger(seconds=check_interval),
                      id="check", name="drift and performance check",
                      next_run_time=now + timedelta(seconds=first_check_delay))
    scheduler.add_job(_guarded("retention", retention, None), IntervalTrigger(seconds=RETENTION_INTERVAL_SECONDS),
                      id="retention", name="store and report retention", next_run_time=now + timedelta(seconds=60))
    if retrain_cron and retrain is not None:
        scheduler.add_job(_guarded("retrain", retrain, None),
                          CronTrigger.from_crontab(retrain_cron, timezone=timezone.utc),
                          id="retrain", name=f"scheduled retrain ({retrain_cron} UTC)")
    return scheduler
