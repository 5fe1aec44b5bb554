"""A later change point for an open incident, found by re-scoring: the concept can change again
while an incident is open (A -> B, a model for B promoted, then A returns), and the retrain after
that must train on rows of the concept that holds now, not on everything since the first change.

The check's own change point (``monitor.daemon.runtime.checks.locate_change``) sees only the rows the
current champion *served* inside the check window; after promotions in quick succession each
champion has served few rows, and a step that straddles a promotion is seen by no one. So before
a retrain the controller asks :func:`later_change`: the current champion scores the labelled rows
since the incident's change point (only those after the end of the champion's own training data,
so its in-sample accuracy cannot pass for a step), and the same z-scan on the per-row loss
(``monitor.drift.changepoint.find_loss_change``) looks for a step down in accuracy of at least
``alerts.accuracy_drop`` (regression: a step up in MAE of at least ``alerts.mae_rise``, relative).
A step after the incident's ``change_ts`` moves it there; rows before it are a concept the
champion fits and the world no longer follows.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Protocol

import numpy as np
import pandas as pd

from monitor.config import DriftloopConfig
from monitor.daemon.decisions.kinds import Outcome
from monitor.daemon.runtime.checks import WindowSource
from monitor.daemon.state.attempts import Attempt, AttemptStore
from monitor.daemon.state.incidents import Incident, IncidentStore
from monitor.errors import DriftloopError
from monitor.tasks import task_of

if TYPE_CHECKING:
    from monitor.drift.changepoint import Change

log = logging.getLogger(__name__)


class Scorer(Protocol):
    def get(self) -> Any: ...  # a trainer Champion: version, predict_proba


def rescored_loss(model: Any, cfg: DriftloopConfig, rows: pd.DataFrame) -> np.ndarray:
    """The per-row loss of ``model`` re-scoring ``rows`` (``predict_proba``: P(1), the class
    probabilities, or the predicted value): 0/1 misclassification, or the absolute error."""
    task = task_of(cfg.model)
    out = np.asarray(model.predict_proba(rows), dtype=np.float64)
    return task.per_row_loss(task.label_values(rows[cfg.model.target]), task.served_output(out, cfg.model.threshold))


def later_change(cfg: DriftloopConfig, store: WindowSource, champion: Scorer, change_ts: float | None,
                 trained_until: Callable[[str], float | None]) -> tuple[Change, float, str] | None:
    """``(change, ts, version)`` of a step down in the current champion's accuracy (regression: a
    step up in its MAE) after ``change_ts`` on re-scored labelled rows newer than
    ``trained_until(version)`` (the end of the champion's training data, when the loop trained it),
    or None."""
    from monitor.drift.changepoint import batch_boundary, find_loss_change
    from trainer.inputs import readable_rows
    if change_ts is None:
        return None
    try:
        model = champion.get()
        start = max(change_ts, trained_until(str(model.version)) or change_ts)
        rows = store.window(last_n=2 * cfg.drift.window_size, since=pd.Timestamp(start, unit="s", tz="UTC"),
                            labelled_only=True)
    except DriftloopError as exc:  # the registry or the store is down: the check's own change point stands
        log.info("no re-scored change point: %s", exc)
        return None
    target = cfg.model.target
    rows = rows[rows[target].notna()].sort_values("ts", kind="stable")
    rows = readable_rows(cfg, rows, what="rows re-scored for a change point").rows  # model.input_roots
    if len(rows) < 100:
        return None
    loss = rescored_loss(model, cfg, rows)
    keep = np.isfinite(loss)
    change = find_loss_change(cfg.model.task, loss[keep])
    _, need, _ = task_of(cfg.model).default_rules(cfg.alerts)[0]  # accuracy_drop, or mae_rise
    if change is None or change.worsening < need:
        return None
    at = batch_boundary(pd.to_datetime(rows["ts"]).to_numpy("datetime64[ns]")[keep], change.index)
    ts = pd.Timestamp(rows["ts"].iloc[np.flatnonzero(keep)[at]]).timestamp()
    return (change, ts, str(model.version)) if ts > change_ts else None


def trained_until(tries: list[Attempt], version: str | None) -> float | None:
    """The end of the training data of ``version`` when one of ``tries`` (an incident's attempts)
    promoted it, else None."""
    for a in reversed(tries):
        if a.status == Outcome.PROMOTED and version is not None and str(a.challenger_version) == str(version):
            end = (a.data_window or {}).get("end")
            return pd.Timestamp(end).timestamp() if end else None
    return None


def follow(cfg: DriftloopConfig, store: WindowSource, champion: Scorer, incidents: IncidentStore,
           attempts: AttemptStore, incident: Incident) -> Incident:
    """``incident`` with its ``change_ts`` moved to a later change found by re-scoring (an event
    ``change_point`` says so), or unchanged."""
    from monitor.daemon.decisions.breach import is_performance_reason
    if incident.change_ts is None or not is_performance_reason(incident.reason):
        return incident
    tries = attempts.for_incident(incident.id)
    found = later_change(cfg, store, champion, incident.change_ts, lambda v: trained_until(tries, v))
    if found is None:
        return incident
    change, ts, version = found
    from monitor.daemon.runtime.views import iso
    log.info("incident %s: later change point at %s on champion v%s's re-scored rows", incident.id, iso(ts), version)
    return incidents.update(
        incident.id, "change_point",
        f"performance changed again at {iso(ts)} ({change.describe()} on the labelled rows since "
        f"{iso(incident.change_ts)}, re-scored by champion v{version}); retraining data starts there", change_ts=ts)
