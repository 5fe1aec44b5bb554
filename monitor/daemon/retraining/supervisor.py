"""The retrain supervisor: single-flight launching of retrain children and watching them.

The attempt row is written before the child starts (so a restart finds it), the child's pid
right after. A watcher thread waits for the child, kills it after
``alerts.retrain_timeout_seconds``, and hands the :class:`ChildResult` to ``on_finished``,
which settles the attempt and its incident (see :class:`monitor.daemon.runtime.controller.Controller`).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from monitor.daemon.state.attempts import Attempt, AttemptStore, BusyError
from monitor.daemon.retraining.launcher import ChildResult, Launcher, RetrainHandle, RetrainJob

log = logging.getLogger(__name__)


class RetrainSupervisor:
    def __init__(self, attempts: AttemptStore, launcher: Launcher,
                 on_finished: Callable[[Attempt, ChildResult], None], timeout_seconds: float,
                 monotonic: Callable[[], float] = time.monotonic):
        self._attempts = attempts
        self._launcher = launcher
        self._on_finished = on_finished
        self._timeout = timeout_seconds
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._handle: RetrainHandle | None = None
        self._watcher: threading.Thread | None = None
        self._stopping = False
        self._idle = threading.Event()
        self._idle.set()
        # Called (no arguments, must not raise) each time a running retrain is settled: the
        # deployment's retrain queue gives its slot to the next model.
        self.on_idle: list[Callable[[], None]] = []

    @property
    def busy(self) -> bool:
        return not self._idle.is_set()

    def launch(self, job: RetrainJob, rows: int | None = None, data_window: dict | None = None) -> Attempt:
        """Record an attempt for ``job`` (its incident and trigger), start the child on the job as
        that attempt runs it (:meth:`RetrainJob.for_attempt`). ``rows`` and ``data_window`` are
        recorded on the attempt. Raises :class:`BusyError` when one is running (here or, via the
        store, elsewhere)."""
        incident_id = job.incident_id
        with self._lock:
            if self._stopping:
                raise BusyError("the daemon is shutting down")
            if self.busy:
                raise BusyError("a retrain is already running")
            attempt = self._attempts.begin(incident_id, job.trigger, rows=rows, data_window=data_window)
            self._idle.clear()
            try:
                handle = self._launcher.launch(job.for_attempt(attempt.id))
            except Exception as exc:
                log.exception("could not start the retrain worker")
                self._idle.set()
                self._finish(attempt, ChildResult(None, error=f"could not start the retrain worker: {exc}"))
                return self._attempts.get(attempt.id)
            self._handle = handle
            self._attempts.set_pid(attempt.id, handle.pid)
            self._watcher = threading.Thread(target=self._watch, args=(attempt, handle),
                                             name=f"retrain-{attempt.id}", daemon=True)
            self._watcher.start()
        log.info("retrain %s started (pid %s) for incident %s", attempt.id, handle.pid, incident_id)
        return self._attempts.get(attempt.id)

    def _watch(self, attempt: Attempt, handle: RetrainHandle) -> None:
        deadline = self._monotonic() + self._timeout
        result: ChildResult | None = None
        try:
            while result is None:
                left = deadline - self._monotonic()
                if left <= 0:
                    log.warning("retrain %s ran past %.0f s; killing it", attempt.id, self._timeout)
                    handle.terminate(grace=5.0)
                    result = handle.wait()
                    if result is not None and not result.ok:
                        result.error = f"timed out after {self._timeout:g} s (alerts.retrain_timeout_seconds)"
                    break
                result = handle.wait(timeout=min(left, 1.0))
            if result is not None and not result.ok and self._stopping:
                result.error = f"aborted: the daemon is shutting down ({result.error})"
                result.interrupted = True
            self._finish(attempt, result or ChildResult(None, error="retrain worker vanished"))
        finally:
            with self._lock:
                self._handle = None
            self._idle.set()
            for notify in list(self.on_idle):
                try:
                    notify()
                except Exception:
                    log.exception("a retrain-settled listener failed")

    def _finish(self, attempt: Attempt, result: ChildResult) -> None:
        try:
            self._on_finished(attempt, result)
        except Exception:  # never let a settling bug kill the watcher silently
            log.exception("settling retrain %s failed", attempt.id)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no retrain is running; False if ``timeout`` passed first."""
        return self._idle.wait(timeout)

    def reopen(self) -> None:
        """Launch again after :meth:`stop`: a deposed leader stops its retrain, and it may be
        elected again later (recovery calls this when it leads)."""
        with self._lock:
            self._stopping = False

    def stop(self, grace: float = 10.0) -> None:
        """Abort the running child (SIGTERM, SIGKILL after ``grace``) and wait until it is settled."""
        with self._lock:
            self._stopping = True
            handle, watcher = self._handle, self._watcher
        if handle is not None:
            log.info("stopping the running retrain (pid %s)", handle.pid)
            handle.terminate(grace=grace)
        if watcher is not None:
            watcher.join(grace + 30)
