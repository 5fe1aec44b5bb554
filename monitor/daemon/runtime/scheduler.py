"""APScheduler wiring: the periodic check, daily retention, the optional retrain cron and, on a
shared store, taking the Alertmanager deliveries followers held for this leader (state/inbox.py).

Every job runs with ``max_instances=1`` and ``coalesce=True``: a check that takes longer than
the interval delays the next one instead of piling up, and missed runs (a suspended laptop)
collapse into one. Jobs never raise into the scheduler: a failure is logged and counted, and
the job runs again at its next time.
"""
from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta, timezone
from typing import Callable

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from monitor.logs import about_model

log = logging.getLogger(__name__)

RETENTION_INTERVAL_SECONDS = 6 * 3600


def _guarded(name: str, fn: Callable[[], object],
             on_error: Callable[[BaseException], None] | None, model: str | None = None) -> Callable[[], None]:
    def run() -> None:
        try:
            if model is not None:
                with about_model(model):
                    fn()
            else:
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
                    first_check_delay: float = 1.0, inbox: Callable[[], object] | None = None,
                    inbox_interval: float = 5.0) -> BackgroundScheduler:
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
    if inbox is not None:
        scheduler.add_job(_guarded("inbox", inbox, None), IntervalTrigger(seconds=inbox_interval), id="inbox",
                          name="Alertmanager deliveries held by followers", next_run_time=now)
    return scheduler


class SharedScheduler:
    """One scheduler for every model of a deployment: each model's jobs (check, retention, retrain
    cron; ids ``<model>:check`` …) at its own interval, all run by one bounded pool of
    ``workers`` threads. A model has at most one check running or waiting (``max_instances=1``), so
    one that checks often or slowly delays the others by at most one check each; the delay between
    a check's due time and its start is recorded per model (:attr:`delays`), a check that came due
    while the model's previous one still ran or waited is skipped and counted (:attr:`skipped`), and
    :meth:`waiting` says how many checks wait for a thread."""

    def __init__(self, workers: int):
        from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_SUBMITTED
        from apscheduler.executors.pool import ThreadPoolExecutor

        self.workers = workers
        self._scheduler = BackgroundScheduler(
            timezone=timezone.utc, executors={"default": ThreadPoolExecutor(max_workers=workers)},
            job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": None})
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._submitted = 0
        self._started = 0
        self._grid: dict[str, tuple[datetime, float]] = {}   # model → its first due time and interval
        self._soon: dict[str, datetime] = {}                  # model → when check_soon asked
        self.delays: dict[str, list[float]] = {}   # model → seconds its checks waited past their due time
        self.skipped: dict[str, int] = {}          # model → checks skipped (the previous one still busy)
        self._scheduler.add_listener(self._on_submitted, EVENT_JOB_SUBMITTED)
        self._scheduler.add_listener(self._on_skipped, EVENT_JOB_MAX_INSTANCES)

    def _on_submitted(self, event: object) -> None:
        if str(getattr(event, "job_id", "")).endswith(":check"):
            with self._lock:
                self._submitted += 1

    def waiting(self) -> int:
        """Checks submitted to the pool that have not started (waiting for a free thread)."""
        with self._lock:
            return max(0, self._submitted - self._started)

    def start(self) -> None:
        if not self._scheduler.running:
            self._stopping.clear()
            self._scheduler.start()

    def shutdown(self, wait: bool = True) -> None:
        """Stop: jobs queued for a thread return at once when they get one (the pool's own shutdown
        runs every queued item: at 50 models on 2 threads that held SIGTERM for minutes); with ``wait``,
        the running ones finish first."""
        self._stopping.set()
        if self._scheduler.running:
            self._scheduler.shutdown(wait=wait)

    def _unless_stopping(self, fn: Callable[[], object]) -> Callable[[], object]:
        def run() -> object:
            if self._stopping.is_set():
                return None
            return fn()
        return run

    def _timed(self, model: str, check: Callable[[], object]) -> Callable[[], object]:
        def run() -> object:
            # Never ask the scheduler here (get_job): its shutdown holds the job-store lock while it
            # waits for these very threads. The due time follows from the interval's grid instead.
            now = datetime.now(timezone.utc)
            with self._lock:
                self._started += 1
                soon = self._soon.pop(model, None)
                grid = self._grid.get(model)
                if soon is not None:
                    due = soon
                elif grid is not None:
                    start, interval = grid
                    elapsed = (now - start).total_seconds()
                    due = start + timedelta(seconds=max(0.0, elapsed // interval * interval))
                else:
                    due = now
                self.delays.setdefault(model, []).append(max(0.0, (now - due).total_seconds()))
            return check()
        return run

    def _on_skipped(self, event: object) -> None:
        """A model's check came due while its previous one was still running or waiting: skipped."""
        job_id = str(getattr(event, "job_id", ""))
        if job_id.endswith(":check"):
            with self._lock:
                model = job_id[:-len(":check")]
                self.skipped[model] = self.skipped.get(model, 0) + 1

    def add_model(self, model: str, *, check: Callable[[], object], check_interval: float,
                  retention: Callable[[], object], retrain: Callable[[], object] | None = None,
                  retrain_cron: str | None = None, on_check_error: Callable[[BaseException], None] | None = None,
                  first_check_delay: float = 1.0, inbox: Callable[[], object] | None = None,
                  inbox_interval: float = 5.0) -> None:
        """Schedule ``model``'s jobs (replacing any it had)."""
        self.remove_model(model)
        now = datetime.now(timezone.utc)
        with self._lock:
            self._grid[model] = (now + timedelta(seconds=first_check_delay), check_interval)
        add = self._scheduler.add_job
        add(_guarded(f"{model}:check", self._unless_stopping(self._timed(model, check)), on_check_error, model),
            IntervalTrigger(seconds=check_interval), id=f"{model}:check",
            name=f"drift and performance check of model {model}",
            next_run_time=now + timedelta(seconds=first_check_delay))
        add(_guarded(f"{model}:retention", self._unless_stopping(retention), None, model),
            IntervalTrigger(seconds=RETENTION_INTERVAL_SECONDS),
            id=f"{model}:retention", name=f"store and report retention of model {model}",
            next_run_time=now + timedelta(seconds=60))
        if retrain_cron and retrain is not None:
            add(_guarded(f"{model}:retrain", self._unless_stopping(retrain), None, model),
                CronTrigger.from_crontab(retrain_cron, timezone=timezone.utc), id=f"{model}:retrain",
                name=f"scheduled retrain of model {model} ({retrain_cron} UTC)")
        if inbox is not None:
            add(_guarded(f"{model}:inbox", self._unless_stopping(inbox), None, model),
                IntervalTrigger(seconds=inbox_interval), id=f"{model}:inbox",
                name=f"Alertmanager deliveries held by followers for model {model}", next_run_time=now)

    def remove_model(self, model: str) -> None:
        """Unschedule ``model``'s jobs; a check of it already running finishes."""
        for kind in ("check", "retention", "retrain", "inbox"):
            try:
                self._scheduler.remove_job(f"{model}:{kind}")
            except Exception:  # JobLookupError: it had none of this kind
                pass
        with self._lock:
            self._grid.pop(model, None)
            self._soon.pop(model, None)

    def check_soon(self, model: str) -> None:
        """Run ``model``'s check now instead of at its next time (a retrain slot freed for it)."""
        job = self._scheduler.get_job(f"{model}:check")
        if job is not None:
            now = datetime.now(timezone.utc)
            with self._lock:
                self._soon[model] = now
            job.modify(next_run_time=now)
            self._scheduler.wakeup()

    def jobs(self) -> list[str]:
        return [job.id for job in self._scheduler.get_jobs()]
