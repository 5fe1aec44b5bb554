"""The daemon's watch on its label-free estimate: recalibrate when labels keep saying it is off.

Every check with at least ``MIN_JUDGED_ROWS`` labelled rows of the champion carries the estimate on
those rows, its band and what they realised (``CheckResult.estimation_check``,
:mod:`monitor.drift.recalibration`). When the realised figure falls outside the band for
``drift.estimation_recalibrate_windows`` such checks in a row, the estimator is refitted on the
champion's labelled rows of the current window, as it scored them: those rows are the champion's
use now, where its reference sample (the rows it was trained beside) may describe a passing
episode. The recalibration is said: a WARNING log line, a note on the open incident (if any), the
counter ``driftloop_estimation_recalibrations_total``, and a record in the calibration folder.

The refit rows are kept per champion version (``<home>/calibration/<model>/v<version>.parquet``,
beside a JSON history of that version's recalibrations) and refitted from there on the first check
after a restart, so a restart does not go back to the estimate labels proved wrong. A new champion
starts on its own reference's estimator. Windows without enough labelled rows neither grow nor break
the streak. A streak completed on the very labelled rows the estimator was last refitted on (no label
arrived since, and the refit did not bring it inside its band there) refits nothing: one such
window had been recalibrated five times in a minute, each time with a note and a history record.
Costs: nothing per check beyond the comparison the check already makes; a recalibration reads the
window once and fits as on a reference (binary: an isotonic fit; regression: seconds).
"""
from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import pandas as pd

from monitor.config import DriftloopConfig
from monitor.tasks import task_of

if TYPE_CHECKING:
    from monitor.drift.estimators import Estimator

log = logging.getLogger(__name__)

MIN_JUDGED_ROWS = 100  # labelled rows a window needs before its comparison counts (monitor.drift.recalibration)


@dataclass
class Recalibration:
    version: str
    rows: int
    at: float
    windows: list[dict[str, Any]] = field(default_factory=list)  # the estimation checks that were outside

    @property
    def message(self) -> str:
        last = self.windows[-1] if self.windows else {}
        figure = last.get("figure", "accuracy")
        return (f"label-free estimate of champion v{self.version} recalibrated on its {self.rows} recent labelled "
                f"rows: realised {figure} outside the estimate's band for {len(self.windows)} labelled window(s) "
                f"in a row (last: realised {last.get('realised', float('nan')):.4f}, estimated "
                f"{last.get('estimated', float('nan')):.4f}; drift.estimation_recalibrate_windows)")

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "rows": self.rows, "at": self.at, "windows": self.windows,
                "message": self.message}


class CalibrationFiles:
    """The rows each champion version was recalibrated on, and the history of its recalibrations."""

    def __init__(self, folder: Path):
        self.folder = folder

    def _paths(self, version: str) -> tuple[Path, Path]:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(version))
        return self.folder / f"v{safe}.parquet", self.folder / f"v{safe}.json"

    def save(self, version: str, rows: pd.DataFrame, record: Recalibration) -> None:
        data, meta = self._paths(version)
        self.folder.mkdir(parents=True, exist_ok=True)
        history = self.history(version) + [record.to_dict()]
        tmp = data.with_suffix(".parquet.tmp")
        rows.to_parquet(tmp, index=False)
        os.replace(tmp, data)
        tmp = meta.with_suffix(".json.tmp")
        tmp.write_text(json.dumps({"version": str(version), "recalibrations": history}, default=str))
        os.replace(tmp, meta)

    def rows(self, version: str) -> pd.DataFrame | None:
        data, _ = self._paths(version)
        try:
            return pd.read_parquet(data) if data.is_file() else None
        except (OSError, ValueError) as exc:  # a torn or foreign file: the reference's estimator serves
            log.warning("cannot read the recalibration rows %s (%s); using the reference's estimate", data, exc)
            return None

    def history(self, version: str) -> list[dict[str, Any]]:
        _, meta = self._paths(version)
        try:
            return list(json.loads(meta.read_text()).get("recalibrations", [])) if meta.is_file() else []
        except (OSError, ValueError):
            return []

    def total(self) -> int:
        """Recalibrations recorded for every version (the counter survives a restart)."""
        if not self.folder.is_dir():
            return 0
        n = 0
        for meta in self.folder.glob("v*.json"):
            try:
                n += len(json.loads(meta.read_text()).get("recalibrations", []))
            except (OSError, ValueError):
                continue
        return n


class EstimationWatch:
    """Per champion version: the streak of labelled windows outside the band, and the recalibrated
    estimator once there is one. ``rows(version)``: the champion's labelled rows of the current window."""

    def __init__(self, cfg: DriftloopConfig, rows: Callable[[str], pd.DataFrame], clock: Callable[[], float],
                 folder: Path | None = None):
        self.cfg = cfg
        self._rows = rows
        self._clock = clock
        self.files = CalibrationFiles(folder or cfg.home / "calibration" / cfg.model.name)
        self._lock = threading.Lock()
        self._estimators: dict[str, Any] = {}   # version -> recalibrated estimator (None: none on file)
        self._version: str | None = None
        self._outside: list[dict[str, Any]] = []
        self.recalibrations = self.files.total()
        self.last: Recalibration | None = None
        # version -> (rows, newest ts) of the labelled rows its estimator was last refitted on
        self._fitted_on: dict[str, tuple[int, str]] = {}

    @property
    def streak(self) -> int:
        return len(self._outside)

    def estimator(self, version: str) -> Estimator | None:
        """The recalibrated estimator of ``version`` (refitted from its file after a restart), or None."""
        version = str(version)
        with self._lock:
            if version in self._estimators:
                return self._estimators[version]
        rows = self.files.rows(version)
        fitted = None
        if rows is not None:
            from monitor.drift.recalibration import refit
            fitted = refit(self.cfg.model, rows)
        with self._lock:
            self._estimators[version] = fitted
        return fitted

    def observe(self, outcome: Any, incidents: Any = None) -> Recalibration | None:
        """One successful check; recalibrates (and says so) when this window completes a streak."""
        need = self.cfg.drift.estimation_recalibrate_windows
        version = None if outcome.champion_version is None else str(outcome.champion_version)
        if version != self._version:
            self._version, self._outside = version, []
        check = getattr(outcome.result, "estimation_check", None)
        if not need or version is None or not check or int(check.get("rows", 0)) < MIN_JUDGED_ROWS:
            return None
        if check.get("inside"):
            self._outside = []
            return None
        self._outside.append(dict(check))
        if len(self._outside) < need:
            return None
        return self._recalibrate(version, incidents)

    def _recalibrate(self, version: str, incidents: Any) -> Recalibration | None:
        from monitor.drift.recalibration import refit
        try:
            rows = self._kept_columns(self._rows(version))
        except Exception as exc:  # the store is down: the next window outside the band tries again
            log.warning("estimate not recalibrated (cannot read the labelled rows: %s)", exc)
            return None
        seen = (len(rows), str(rows["ts"].max()) if "ts" in rows.columns and len(rows) else "")
        if self._fitted_on.get(version) == seen:
            # Refitted on these very rows already and still outside its band on them (the estimator
            # cannot describe them better): another refit would change nothing but add one more note,
            # log line and history record per streak while no label arrives. New rows try again.
            self._outside = []
            log.info("estimate of v%s still outside its band on the %d labelled rows it was recalibrated on; "
                     "not refitted again until new labelled rows arrive", version, len(rows))
            return None
        fitted = refit(self.cfg.model, rows)
        if fitted is None:
            log.info("estimate of v%s is off but its %d labelled rows cannot fit a new one yet", version, len(rows))
            return None
        record = Recalibration(version, len(rows), self._clock(), list(self._outside))
        try:
            self.files.save(version, rows, record)
        except (OSError, ValueError) as exc:  # kept in memory all the same; lost at a restart
            log.warning("recalibration rows not saved (%s); a restart goes back to the reference's estimate", exc)
        with self._lock:
            self._estimators[version] = fitted
        self._fitted_on[version] = seen
        self._outside = []
        self.recalibrations += 1
        self.last = record
        log.warning("%s", record.message)
        current = incidents.current() if incidents is not None else None
        if current is not None:
            incidents.note(current.id, "estimate_recalibrated", record.message, record.to_dict())
        return record

    def _kept_columns(self, rows: pd.DataFrame) -> pd.DataFrame:
        m = self.cfg.model
        wanted = {*m.feature_names, m.target, m.score, m.prediction, "ts", "model_version",
                  *task_of(m).proba_columns(m.n_classes)}
        rows = rows[rows[m.target].notna()] if m.target in rows.columns else rows.iloc[:0]
        return rows[[c for c in rows.columns if c in wanted]].reset_index(drop=True)
