"""Each check's key figures, fed to the champion's monitoring run in MLflow (trainer/monitoring_runs.py):
one run per champion version, one step per check, so the MLflow UI charts a version's performance
and drift between retrains.

:class:`MonitoringFeed` is a :attr:`Daemon.after_check <monitor.daemon.runtime.daemon.Daemon.after_check>`
listener. MLflow being slow or down must never fail or delay a check, so the listener only puts the
check's figures on a bounded queue (``capacity`` checks, 200: at most ~15 KB each; when full the
oldest is dropped and counted) and a background thread, started when there is something to send
and gone when there is not, logs them. An outage (MLflow's reachability probe fails) leaves the
queue as it is, to be sent with the next check; a batch MLflow refuses ``max_tries`` times is
dropped and counted, so one bad figure cannot stop the ones after it. Points queued at shutdown
are sent if MLflow answers within the stop's grace; what is left is lost (the check log keeps
every check).

Only successful checks that the check log recorded are fed: their id is the step.
"""
from __future__ import annotations

import logging
import math
import re
import threading
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Sequence

from trainer.monitoring_runs import Point

if TYPE_CHECKING:
    from monitor.daemon.runtime.moves import CheckReport
    from monitor.drift.result import CheckResult, FeatureDrift

log = logging.getLogger(__name__)

# CheckResult fields logged under their own names (those of `driftloop check --json`), when the check
# has them: each task fills its own (a regression check has mae, not accuracy), estimates only when
# drift.estimate can calibrate them, the baseline_* bars stay flat lines to read the others against.
RESULT_FIGURES = (
    "accuracy", "roc_auc", "precision", "recall", "f1", "positive_rate", "predicted_positive_rate",
    "macro_f1", "weighted_f1", "mae", "rmse", "mape", "r2", "bias", "residual_shift",
    "estimated_accuracy", "estimated_roc_auc", "estimated_precision", "estimated_recall", "estimated_f1",
    "estimated_macro_f1", "estimated_mae", "estimated_rmse", "estimation_error",
    "baseline_accuracy", "baseline_roc_auc", "baseline_mae",
    "drift_share", "window_rows", "labelled_rows", "estimated_rows", "duration_seconds")
# Figures made from the check, by name (their meaning: docs/parts/daemon.md, "The monitoring run").
DERIVED_FIGURES = ("dataset_drift", "drifted_features", "prediction_drift", "prediction_drift_score",
                   "label_drift", "label_drift_score", "other_version_rows", "incident_open")
FEATURE_PREFIX = "feature_drift/"  # + the feature's name: its drift score (the method's distance or p-value)
MAX_FEATURES = 100                 # per check: a wide model's charts stay readable and its batches small


def _flag(drift: FeatureDrift | None, prefix: str) -> dict[str, float]:
    if drift is None:
        return {}
    out = {prefix: float(drift.drifted)}
    if drift.score is not None:
        out[f"{prefix}_score"] = float(drift.score)
    return out


def metric_key(feature: str) -> str:
    """``feature_drift/<name>`` with what MLflow refuses in a metric name made ``_``."""
    name = re.sub(r"[^\w.\- ]", "_", feature).strip() or "_"
    return FEATURE_PREFIX + ("_" if set(name) == {"."} else name)


def check_figures(report: CheckReport) -> dict[str, float]:
    """A successful check's key figures, metric name → finite value (what the run's charts show)."""
    outcome = report.outcome
    result: CheckResult = outcome.judged
    figures: dict[str, float] = {}
    for name in RESULT_FIGURES:
        value = getattr(result, name)
        if value is not None:
            figures[name] = float(value)
    figures.update(dataset_drift=float(result.dataset_drift), drifted_features=float(len(result.drifted_features)),
                   other_version_rows=float(outcome.other_version_rows),
                   incident_open=float(report.incident is not None),
                   **_flag(result.prediction_drift, "prediction_drift"), **_flag(result.label_drift, "label_drift"))
    for f in result.features[:MAX_FEATURES]:
        if f.score is not None:
            figures[metric_key(f.name)] = float(f.score)
    return {k: v for k, v in figures.items() if math.isfinite(v)}


class RunLog(Protocol):
    """The MLflow side (:class:`trainer.monitoring_runs.MonitoringRuns`); each raises on failure."""

    def ready(self) -> None: ...

    def open(self, version: str) -> str: ...

    def log(self, run_id: str, points: Sequence[Point]) -> None: ...


@dataclass
class _Queued:
    version: str
    point: Point
    tries: int = 0


class MonitoringFeed:
    """The listener: ``feed(report)`` after every check (see the module docstring). ``logged``,
    ``dropped`` and ``failures`` count points sent, points given up, and failed sends."""

    def __init__(self, runs: RunLog, *, capacity: int = 200, batch: int = 20, max_tries: int = 5):
        self._runs = runs
        self._capacity, self._batch, self._max_tries = capacity, batch, max_tries
        self._queue: deque[_Queued] = deque()
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._run: tuple[str, str] | None = None  # (version, run id) of the run last logged to
        self._failing = False
        self.logged = self.dropped = self.failures = 0

    def __call__(self, report: CheckReport) -> None:
        """Queue the check's figures and make sure a sender is on its way; never raises, never waits
        for MLflow."""
        try:
            outcome = report.outcome
            if outcome.status != "ok" or outcome.result is None or outcome.id is None or not outcome.champion_version:
                return
            item = _Queued(str(outcome.champion_version), Point(int(outcome.id), float(outcome.ts),
                                                                check_figures(report)))
        except Exception:  # a listener must not raise; a bug here costs a chart point, not a check
            log.exception("monitoring run: could not read the figures of a check")
            return
        with self._lock:
            if len(self._queue) >= self._capacity:
                self._queue.popleft()
                self.dropped += 1
            self._queue.append(item)
            if self._worker is None:
                self._worker = threading.Thread(target=self._drain, name="driftloop-monitoring-run", daemon=True)
                self._worker.start()

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for the sender to finish (sent all, or stopped by an outage); True if it did in time."""
        with self._lock:
            worker = self._worker
        if worker is not None:
            worker.join(timeout)
            return not worker.is_alive()
        return True

    def _drain(self) -> None:
        """Send batches (one version's points each) until the queue is empty or a send fails. The
        worker is let go under the same lock that finds the queue empty, so a point queued meanwhile
        always has a sender."""
        sending = True
        while True:
            with self._lock:
                if not sending or not self._queue:
                    self._worker = None
                    return
                head = self._queue[0].version
                batch: list[_Queued] = []
                while self._queue and self._queue[0].version == head and len(batch) < self._batch:
                    batch.append(self._queue.popleft())
            try:
                sending = self._send(head, batch)
            except Exception:  # a bug of ours: lose this batch, keep the sender alive for the rest
                log.exception("monitoring run: could not send %d checks", len(batch))
                with self._lock:
                    self.dropped += len(batch)
                sending = False

    def _send(self, version: str, batch: list[_Queued]) -> bool:
        """Log ``batch`` to ``version``'s run; False (the batch back in the queue) when MLflow is
        down or refused it, so the next check's sender tries again."""
        try:
            self._runs.ready()
        except Exception as exc:
            self._requeue(batch, counted=False)
            self._failed(exc)
            return False
        try:
            if self._run is None or self._run[0] != version:  # a new champion: its run (the old one ends)
                self._run = (version, self._runs.open(version))
            self._runs.log(self._run[1], [q.point for q in batch])
        except Exception as exc:
            self._run = None  # found again next time (a run deleted by hand is made anew)
            self._requeue(batch, counted=True)
            self._failed(exc)
            return False
        with self._lock:
            self.logged += len(batch)
        if self._failing:
            self._failing = False
            log.info("monitoring run: logging to MLflow again")
        return True

    def _requeue(self, batch: list[_Queued], *, counted: bool) -> None:
        with self._lock:
            self.failures += 1
            for q in batch:
                q.tries += counted
            keep = [q for q in batch if q.tries < self._max_tries]
            room = max(0, self._capacity - len(self._queue))
            keep = keep[len(keep) - room:] if room < len(keep) else keep  # the oldest go first
            self.dropped += len(batch) - len(keep)
            self._queue.extendleft(reversed(keep))

    def _failed(self, exc: Exception) -> None:
        """Said once per outage, at WARNING; the repeats at DEBUG."""
        level = logging.DEBUG if self._failing else logging.WARNING
        self._failing = True
        log.log(level, "monitoring run: checks not logged to MLflow yet (%d queued, %d dropped): %s",
                self.pending, self.dropped, exc)
