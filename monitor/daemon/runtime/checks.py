"""The drift and performance check: the current window against the champion's baseline.

:class:`CheckJob` never raises for expected conditions: no champion yet, an empty window and
evaluation errors become a :class:`CheckOutcome` with ``status`` ``no_champion``, ``empty`` or
``error`` and a message saying what to do, so the scheduler job keeps running. An unexpected
exception (a bug, a third-party surprise, in the window's read or anywhere else in a check) is
logged with its traceback and recorded as an ``error`` check too."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

import numpy as np
import pandas as pd

from monitor.config import DriftloopConfig, ModelConfig
from monitor.daemon.decisions.breach import baseline_bounds
from monitor.daemon.retraining.champion import NoChampionError
from monitor.errors import DriftloopError, RegistryError
from monitor.tasks import task_of

if TYPE_CHECKING:  # plain data of the parts below; importing monitor.drift here would cost start-up
    from monitor.drift.changepoint import Change
    from monitor.drift.estimators import Estimator
    from monitor.drift.result import CheckResult
    from trainer import Champion

log = logging.getLogger(__name__)

STATUSES = ("ok", "no_champion", "empty", "error")


class ChampionSource(Protocol):
    def get(self) -> Champion:
        """A trainer ``Champion`` (version, run_id, predict_proba, baseline); raises
        ``NoChampionError`` when the registry has none, ``RegistryError`` when it cannot answer."""


class WindowSource(Protocol):
    def window(self, last_n: int | None = None, since: Any = None, until: Any = None,
               labelled_only: bool = False) -> pd.DataFrame: ...


@dataclass
class CheckOutcome:
    ts: float
    status: str
    message: str
    champion_version: str | None = None
    result: CheckResult | None = None  # when status == "ok"
    window_rows: int = 0
    labelled_rows: int = 0
    window_start: float | None = None
    window_end: float | None = None
    labels_end: float | None = None    # the newest labelled row's time (rows after it: labels not there yet)
    report_html: Path | None = None
    report_json: Path | None = None
    duration_seconds: float = 0.0
    id: int | None = None              # the check_results row, once recorded
    extra: dict[str, Any] = field(default_factory=dict)
    # Version-aware evaluation: rows scored by other versions are left out of the judged window
    # and summarised here ({version: {rows, labelled, accuracy}}; "unknown" when not said).
    versions: dict[str, dict[str, Any]] = field(default_factory=dict)
    other_version_rows: int = 0
    # Where the champion's accuracy stepped down inside the window (monitor.drift.changepoint).
    change: Change | None = None
    change_ts: float | None = None

    @property
    def judged(self) -> CheckResult:
        """The result the policy judges: only a successful check has one."""
        if self.result is None:
            raise ValueError(f"check {self.id} ({self.status}) has no result to judge")
        return self.result

    @property
    def report_paths(self) -> list[str]:
        """The check's report files; with the static summary page when it was written (it is the one
        MLflow's artifact viewer can render, so a retrain attaches it too)."""
        summary = Path(self.report_html).with_suffix(".summary.html") if self.report_html else None
        return [str(p) for p in (self.report_html, summary, self.report_json) if p and (p != summary or p.is_file())]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "ts": self.ts, "status": self.status, "message": self.message,
            "champion_version": self.champion_version, "window_rows": self.window_rows,
            "labelled_rows": self.labelled_rows, "window_start": self.window_start,
            "window_end": self.window_end, "labels_end": self.labels_end,
            "report_html": str(self.report_html) if self.report_html else None,
            "report_json": str(self.report_json) if self.report_json else None,
            "duration_seconds": self.duration_seconds,
            "versions": self.versions, "other_version_rows": self.other_version_rows,
            "change": self.change.to_dict() if self.change is not None else None, "change_ts": self.change_ts,
            "result": self.result.to_dict() if self.result is not None else None,
        }


def _epoch(ts: Any) -> float | None:
    if ts is None or pd.isna(ts):
        return None
    return pd.Timestamp(ts).timestamp()


class CheckJob:
    """One check: read the window, load the champion, evaluate, save the Evidently snapshot.

    ``evaluate`` is ``monitor.drift.evaluate_window``; ``save_report(result, ts) -> (html, json)``
    writes the snapshot (with retention) or returns ``(None, None)`` when there is none."""

    def __init__(self, cfg: DriftloopConfig, store: WindowSource, champion: ChampionSource,
                 evaluate: Callable[..., CheckResult],
                 save_report: Callable[[CheckResult, float], tuple[Path | None, Path | None]],
                 clock: Callable[[], float] = time.time, estimator: Callable[[str], Estimator | None] | None = None,
                 tenure: Callable[[str], float | None] | None = None):
        """``estimator(version)``: a recalibrated label-free estimator for the champion, or None to
        keep its reference's (monitor.daemon.runtime.estimation_watch); passed to ``evaluate`` as ``estimator``.
        ``tenure(version)``: when a champion back on the throne returned
        (:meth:`~monitor.daemon.state.attempts.AttemptStore.returned_at`), so its earlier tenure's rows
        are not judged as its present; None for a first tenure."""
        self._cfg = cfg
        self._tenure = tenure
        from monitor.drift.min_labels import MinLabels  # numpy and pandas only
        self._labels = MinLabels(cfg.drift, cfg.alerts, cfg.model)  # drift.min_labels, resolved per champion
        self._estimator = estimator
        self._store = store
        self._champion = champion
        self._evaluate = evaluate
        self._save_report = save_report
        self._clock = clock

    def current_window(self, labelled_only: bool = False) -> pd.DataFrame:
        drift = self._cfg.drift
        if drift.window_seconds is not None:
            since = pd.Timestamp(self._clock() - drift.window_seconds, unit="s", tz="UTC")
            return self._store.window(since=since, labelled_only=labelled_only)
        window = self._store.window(last_n=drift.window_size, labelled_only=labelled_only)
        if drift.labelled_window:
            window = self._sized_by_labels(window, labelled_only)
        return window

    def _sized_by_labels(self, window: pd.DataFrame, labelled_only: bool) -> pd.DataFrame:
        """With sampled or late labels the last ``drift.window_size`` rows may never hold
        ``drift.min_labels`` labelled ones (20 % labels: 5,000 rows hold 1,000), and performance
        would never be judged: the window then reaches back to the newest ``min_labels`` labelled
        rows (at most ``drift.max_window_rows`` rows). Two more reads, only in that case. ``min_labels``
        is the last check's (auto: resolved for its champion; before the first, the configured
        number or auto's ceiling)."""
        drift, target = self._cfg.drift, self._cfg.model.target
        need = self._labels.last.value
        have = len(window) if labelled_only else (int(window[target].notna().sum()) if len(window) else 0)
        if have >= need or len(window) < drift.window_size:
            return window  # enough labels, or the store holds no more rows than the window
        labelled = self._store.window(last_n=need, labelled_only=True)
        if len(labelled) <= have or not len(labelled):
            return window
        since = labelled["ts"].iloc[0]
        wider = self._store.window(last_n=max(drift.max_window_rows, drift.window_size), since=since,
                                   labelled_only=labelled_only)
        return wider if len(wider) > len(window) else window

    def run(self) -> CheckOutcome:
        ts = self._clock()
        started = time.perf_counter()
        try:
            outcome = self._run(ts)
        except Exception as exc:  # outside the reads and the evaluation, which say what failed themselves
            log.exception("check failed unexpectedly")
            outcome = CheckOutcome(ts, "error", f"check failed unexpectedly: {type(exc).__name__}: {exc}")
        outcome.duration_seconds = time.perf_counter() - started
        return outcome

    def _run(self, ts: float) -> CheckOutcome:
        target = self._cfg.model.target
        try:
            window = self.current_window()
        except DriftloopError as exc:
            return CheckOutcome(ts, "error", f"cannot read the window from the store: {exc}")
        except Exception as exc:  # a bug, or a stored row the frame cannot hold: recorded, the next check runs
            log.exception("check: reading the window failed unexpectedly")
            return CheckOutcome(ts, "error",
                                f"cannot read the window from the store (unexpected): {type(exc).__name__}: {exc}")

        def span_of(frame: pd.DataFrame) -> dict[str, Any]:
            n = len(frame)
            return dict(window_rows=n, labelled_rows=int(frame[target].notna().sum()) if n else 0,
                        window_start=_epoch(frame["ts"].iloc[0]) if n else None,
                        window_end=_epoch(frame["ts"].iloc[-1]) if n else None,
                        labels_end=_epoch(frame.loc[frame[target].notna(), "ts"].max()) if n else None)

        span = span_of(window)
        try:
            champion = self._champion.get()
        except NoChampionError as exc:
            return CheckOutcome(ts, "no_champion",
                                f"no champion model to compare against ({exc}); train one with `driftloop train`, "
                                f"or, if registered model {self._cfg.registered_model_name!r} has versions, point "
                                "its 'champion' alias at one (MLflow UI: Models, the version, Aliases)",
                                **span)
        except RegistryError as exc:
            return CheckOutcome(ts, "error", f"cannot load the champion: {exc}", **span)
        version = str(champion.version)
        served = getattr(getattr(champion, "model", None), "task", None)
        if served is not None and served != self._cfg.model.task:
            # The task (and the store's columns) are fixed when the command starts, from the config or
            # the champion of that moment; a champion of another task needs a restart to be judged.
            return CheckOutcome(ts, "error", f"champion v{version} is a {served} model but this runs with model.task "
                                f"{self._cfg.model.task}; restart driftloop serve (or set model.task) to judge it",
                                champion_version=version, **span)
        versions = version_summary(window, self._cfg.model)
        since = self._tenure(version) if self._tenure is not None else None
        window = champion_rows(window, version, returned=since is not None)
        other = span["window_rows"] - len(window)
        span = span_of(window)
        rows = len(window)
        if rows == 0:
            where = (f"in the last {self._cfg.drift.window_seconds:g} s" if self._cfg.drift.window_seconds
                     else "in the store")
            if since is not None:
                left = pd.Timestamp(since, unit="s", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ")
                # since: when the alias last left this version (a later one's promotion); it is back now
                where += f" since it is champion again (rows after {left}, when the alias last left it)"
            what = (f"no predictions scored by champion v{version} {where} yet ({other} by other versions); "
                    "judging starts when it has served some" if other else f"no predictions {where} yet; nothing to "
                                                                           "check")
            return CheckOutcome(ts, "empty", what, champion_version=version, versions=versions,
                                other_version_rows=other, **span)
        try:
            maturity = None
            if self._cfg.drift.label_maturity:  # labels that arrive by outcome: the young rows' labels wait
                from monitor.drift.maturity import label_maturity, withhold_immature
                maturity = label_maturity(window, self._cfg.model)
                window = withhold_immature(window, maturity, target)
            baseline = champion.baseline
            override = self._estimator(version) if self._estimator is not None else None
            extra: dict[str, Any] = {"estimator": override} if override is not None else {}
            # drift.descriptors' vocabulary: the champion's own, when its training.entrypoint saved one.
            artifacts = getattr(getattr(champion, "model", None), "artifacts_folder", None)
            if self._cfg.drift.descriptors.text is not None and artifacts is not None:
                extra["artifacts"] = artifacts
            from monitor.drift.constraints import constraints_for
            constraints = constraints_for(self._cfg)  # drift.constraints: a bad file is reported, never raised
            if constraints is not None:
                extra["constraints"] = constraints
            need = self._labels.of(version, baseline.metrics, baseline.reference)  # drift.min_labels: auto
            drift = self._cfg.drift.model_copy(update={"min_labels": need.value})
            result = self._evaluate(baseline.reference, window, self._cfg.model, drift,
                                    dict(baseline.metrics), **extra)
            result.min_labels_auto = dict(need.needs) if need.auto else None
            result.baseline_bounds = baseline_bounds(getattr(baseline, "intervals", None)) or None
            result.label_maturity = maturity.to_dict() if maturity is not None else None
        except DriftloopError as exc:
            return CheckOutcome(ts, "error", f"evaluation failed: {exc}", champion_version=version, **span)
        except Exception as exc:  # a bug or a third-party surprise: log it fully, keep the daemon alive
            log.exception("check failed unexpectedly")
            return CheckOutcome(ts, "error", f"evaluation failed unexpectedly: {type(exc).__name__}: {exc}",
                                champion_version=version, **span)
        html = js = None
        try:
            html, js = self._save_report(result, ts)
        except Exception as exc:  # a full disk must not lose the check itself
            log.warning("could not save the Evidently report: %s", exc)
        # evaluate_window counted the labelled rows itself; its count is the one its metrics rest on.
        span.update(window_rows=int(result.window_rows), labelled_rows=int(result.labelled_rows))
        change, change_ts = locate_change(window, self._cfg.model)
        return CheckOutcome(ts, "ok", "checked", champion_version=version, result=result,
                            report_html=html, report_json=js, versions=versions, other_version_rows=other,
                            change=change, change_ts=change_ts, **span)


UNKNOWN_VERSION = "unknown"
MAX_VERSIONS_REPORTED = 10


def champion_rows(window: pd.DataFrame, version: str, returned: bool = False) -> pd.DataFrame:
    """The rows the champion scored, and those whose scorer is unknown (senders that do not say
    which version scored a row are judged as before: against the current champion). ``returned``
    (back on the throne, :func:`~monitor.daemon.state.attempts.returned_at`): only rows after the last
    one another version scored, in the rows' own time (a client's clock need not match ours), not its
    earlier tenure's."""
    if "model_version" not in window.columns or not len(window):
        return window
    versions = window["model_version"]
    keep = versions.isna() | (versions == version)
    others = ~keep & (versions != UNKNOWN_VERSION)
    if returned and bool(others.any()):
        ts = window["ts"]
        keep &= ts > ts[others].max()
    if bool(keep.all()):
        return window
    return window[keep.to_numpy()].reset_index(drop=True)


def _labelled_loss(frame: pd.DataFrame, model: ModelConfig) -> np.ndarray:
    """The per-row loss (:meth:`monitor.tasks.Task.per_row_loss`) of ``frame``'s labelled rows, in
    their order: 0/1 misclassification of the served class, or the absolute error for regression."""
    task = task_of(model)
    return task.per_row_loss(task.label_values(frame[model.target]), task.label_values(frame[model.prediction]))


def version_summary(window: pd.DataFrame, model: ModelConfig) -> dict[str, dict[str, Any]]:
    """Rows, labelled rows and accuracy (regression: MAE) per scoring version in the window (newest
    versions first, at most ``MAX_VERSIONS_REPORTED``), so a promotion's effect is visible per model."""
    if not len(window):
        return {}
    versions = (window["model_version"].fillna(UNKNOWN_VERSION) if "model_version" in window.columns
                else pd.Series(UNKNOWN_VERSION, index=window.index))
    out: dict[str, dict[str, Any]] = {}
    last_seen = window.groupby(versions.to_numpy(), sort=False)["ts"].max().sort_values(ascending=False)
    task = task_of(model)
    figure = task.primary_metric  # accuracy, or MAE
    for v in list(last_seen.index)[:MAX_VERSIONS_REPORTED]:
        part = window[(versions == v).to_numpy()]
        labelled = part[part[model.target].notna()]
        loss = _labelled_loss(labelled, model) if len(labelled) else None
        value = task.loss_figure(loss) if loss is not None and len(loss) else None
        out[str(v)] = {"rows": int(len(part)), "labelled": int(len(labelled)), figure: value}
    return out


def locate_change(window: pd.DataFrame, model: ModelConfig) -> tuple[Change | None, float | None]:
    """The change point of the champion's labelled loss in ``window``, and its time (batch edge)."""
    from monitor.drift.changepoint import batch_boundary, find_loss_change
    labelled = window[window[model.target].notna()]
    if len(labelled) < 100:
        return None, None
    labelled = labelled.sort_values("ts", kind="stable")
    loss = _labelled_loss(labelled, model)
    keep = np.isfinite(loss)
    change = find_loss_change(model.task, loss[keep])
    if change is None:
        return None, None
    at = batch_boundary(pd.to_datetime(labelled["ts"]).to_numpy("datetime64[ns]")[keep], change.index)
    return change, _epoch(labelled["ts"].iloc[np.flatnonzero(keep)[at]])
