"""A retrain's progress for whoever watches it. After each epoch of the warm start (and of the fresh
model that may compete with it, ``training.cold_start``) :func:`trainer.retraining.train` tells an
:class:`EpochSink`; the trainer's worker hands in a :class:`ProgressFile`, which rewrites
``progress.json`` beside the result (:class:`monitor.retrain_contract.RetrainProgress`): the daemon
shows it in ``driftloop status`` and ``GET /v1/status``, and the demos print it while they wait.

Bounded: the file is rewritten at most once per ``every`` seconds (a tabular model's epochs take
milliseconds, and each write is an fsync'd replace), and at each model's first epoch, so it may lag
the last epoch by that much; the result, not the progress, is what the daemon settles on. When the
training ends the file says so at once, with the stage that follows (``judging`` the challenger on
the held-out rows, then ``publishing`` it: registry, exports, alias), which can take a while for a
large holdout or an INT8 export.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Callable, Mapping, Protocol

from monitor.files import PRIVATE, atomic_write_json
from monitor.retrain_contract import RetrainProgress, Series, SeriesProgress, Stage


class EpochSink(Protocol):
    def epoch(self, series: Series, epochs: int, rows: int, record: Mapping[str, float]) -> None:
        """``record`` (the loop's: ``epoch``, ``train_loss``, ``val_loss``, ...) ended one epoch of
        ``series`` (``warm`` or ``cold``), which trains on ``rows`` rows for at most ``epochs``."""

    def stage(self, stage: Stage) -> None:
        """Training is over; the retrain now does ``stage`` (``judging``, then ``publishing``)."""


class ProgressFile:
    """``path`` (``progress.json``) with the latest epoch of each series; ``clock`` in epoch seconds."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time, every: float = 1.0):
        self.path, self._clock, self._every = Path(path), clock, every
        self._started = clock()
        self._written: float | None = None
        self._series: dict[Series, SeriesProgress] = {}
        self._stage: Stage = "training"

    def epoch(self, series: Series, epochs: int, rows: int, record: Mapping[str, float]) -> None:
        now = self._clock()
        first = series not in self._series  # a model's first epoch is written at once, whatever the rate
        self._series[series] = SeriesProgress(
            epoch=int(record["epoch"]), epochs=max(int(epochs), int(record["epoch"])), rows=int(rows),
            train_loss=_finite(record.get("train_loss")), val_loss=_finite(record.get("val_loss")),
            seconds=max(0.0, now - self._started))
        if not first and self._written is not None and now - self._written < self._every:
            return
        self._write(now)

    def stage(self, stage: Stage) -> None:
        """Written at once, whatever the rate: it also carries the last epochs the rate held back."""
        self._stage = stage
        self._write(self._clock())

    def _write(self, now: float) -> None:
        body = RetrainProgress(started=self._started, updated=now, series=self._series, stage=self._stage)
        # 0600 as the request and the result beside it; a failed write costs the watcher a line, not the retrain.
        try:
            atomic_write_json(self.path, body.model_dump(mode="json"), mode=PRIVATE)
        except OSError:
            return
        self._written = now


def _finite(x: float | None) -> float | None:
    return float(x) if x is not None and math.isfinite(float(x)) else None
