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

A concept that keeps moving (gradual drift) shows no such step: it wears each new champion down a
little per batch. So when the loop trained the champion (its try's data end is known) and no step
is found, :func:`below_own_figure` asks whether all its newer rows together fall below its own
held-out figure by the alert threshold; then the change is dated to the first of them, and the
next retrain learns from the rows after the champion's training data.
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


def matured(cfg: DriftloopConfig, store: WindowSource, rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` (labelled rows to compare models on) less those whose labels have not all had time
    to arrive when labels arrive by outcome (:mod:`monitor.drift.maturity`, read on the most recent
    ``drift.window_size`` labelled rows; ``drift.label_maturity``)."""
    if not cfg.drift.label_maturity or not len(rows):
        return rows
    from monitor.drift.maturity import label_maturity, mature_rows
    try:
        recent = store.window(last_n=cfg.drift.window_size, labelled_only=True)
    except DriftloopError as exc:
        log.info("label maturity not read: %s", exc)
        return rows
    return mature_rows(rows, label_maturity(recent, cfg.model))


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
        trained = trained_until(str(model.version))
        start = max(change_ts, trained or change_ts)
        rows = store.window(last_n=2 * cfg.drift.window_size, since=pd.Timestamp(start, unit="s", tz="UTC"),
                            labelled_only=True)
    except DriftloopError as exc:  # the registry or the store is down: the check's own change point stands
        log.info("no re-scored change point: %s", exc)
        return None
    target = cfg.model.target
    rows = rows[rows[target].notna()].sort_values("ts", kind="stable")
    rows = matured(cfg, store, rows)  # labels that arrive by outcome: the young rows' labels are skewed
    if trained is not None and trained >= change_ts:  # its last training row is in-sample too
        rows = rows[pd.to_datetime(rows["ts"], utc=True) > pd.Timestamp(trained, unit="s", tz="UTC").round("us")]
    rows = readable_rows(cfg, rows, what="rows re-scored for a change point").rows  # model.input_roots
    if len(rows) < 100:
        return None
    loss = rescored_loss(model, cfg, rows)
    keep = np.isfinite(loss)
    change = find_loss_change(cfg.model.task, loss[keep])
    _, need, _ = task_of(cfg.model).default_rules(cfg.alerts)[0]  # accuracy_drop, or mae_rise
    if change is None or change.worsening < need:
        # No step inside the rows: has the whole of them fallen below the champion's own held-out
        # figure? Only for a champion the loop trained on rows up to ``trained`` (its figure was
        # measured on that concept): the concept moved on after its training data, gradually.
        change = below_own_figure(cfg, model, loss[keep]) if trained is not None and trained >= change_ts else None
        if change is None:
            return None
        at = 0
    else:
        at = batch_boundary(pd.to_datetime(rows["ts"]).to_numpy("datetime64[ns]")[keep], change.index)
    ts = pd.Timestamp(rows["ts"].iloc[np.flatnonzero(keep)[at]]).timestamp()
    return (change, ts, str(model.version)) if ts > change_ts else None


#: How far (in standard errors) the champion's figure on its newer rows must lie beyond its own
#: held-out figure, besides the alert threshold, for :func:`below_own_figure`.
OWN_FIGURE_Z = 3.0
#: Fewer re-scored rows never count as fallen below the champion's own figure.
OWN_FIGURE_ROWS = 200


def below_own_figure(cfg: DriftloopConfig, model: Any, loss: np.ndarray) -> Change | None:
    """A :class:`Change` at the first of the re-scored rows (time order) when the champion's figure on
    all of them is worse than its own held-out figure (``baseline.metrics``: what it was promoted
    on) by at least the alert threshold (``alerts.accuracy_drop``; regression: ``alerts.mae_rise``,
    relative) and by ``OWN_FIGURE_Z`` standard errors of the difference; None otherwise. The held-out
    figure's own error counts (``baseline.intervals``, its interval on the rows it was measured on):
    0.88 on 150 held-out rows is 0.88 ± 0.05, and 0.84 on 1,000 newer rows is no move from it. A
    baseline without intervals counts as exact. A concept that keeps moving
    (gradual drift) wears a new champion down a little per batch: no step inside its newer rows is
    strong enough to find, yet together they are no longer the concept it learnt, and the next
    retrain should learn from them, not from the older rows since the incident's change."""
    from monitor.drift.changepoint import Change
    task = task_of(cfg.model)
    _, need, _ = task.default_rules(cfg.alerts)[0]
    baseline = getattr(model, "baseline", None)
    own = (getattr(baseline, "metrics", None) or {}).get(task.primary_metric)
    own_se = _own_se(getattr(baseline, "intervals", None), task.primary_metric)
    n = len(loss)
    if own is None or not np.isfinite(own) or n < OWN_FIGURE_ROWS:
        return None
    if task.primary_metric == "mae":
        mae, sd = float(loss.mean()), float(loss.std(ddof=1))
        rise = (mae - own) / own if own > 0 else np.inf
        se = np.sqrt(sd * sd / n + own_se * own_se)
        z = (mae - own) / se if se > 0 else np.inf
        if rise < need or z < OWN_FIGURE_Z:
            return None
        return Change(index=0, rows_before=0, rows_after=n, accuracy_before=None, accuracy_after=None, z=float(z),
                      mae_before=float(own), mae_after=mae, mae_after_sd=sd)
    accuracy = 1.0 - float(loss.mean())
    se = np.sqrt(max(accuracy * (1.0 - accuracy), 1.0 / n) / n + own_se * own_se)
    z = (own - accuracy) / se
    if own - accuracy < need or z < OWN_FIGURE_Z:
        return None
    return Change(index=0, rows_before=0, rows_after=n, accuracy_before=float(own), accuracy_after=accuracy, z=float(z))


def _own_se(intervals: Any, figure: str) -> float:
    """The standard error of a baseline figure, from its interval (``Baseline.intervals``); 0 when
    the baseline has none (logged before intervals were recorded: counted as exact, as before)."""
    ci, confidence = (intervals or {}).get(figure), (intervals or {}).get("confidence", 0.95)
    if not (isinstance(ci, (list, tuple)) and len(ci) == 2 and isinstance(confidence, (int, float))
            and 0 < confidence < 1):
        return 0.0
    from monitor.stats import _z
    return max(float(ci[1]) - float(ci[0]), 0.0) / (2.0 * _z(float(confidence)))


def trained_until(tries: list[Attempt], version: str | None) -> float | None:
    """The end of the training data of ``version`` when one of ``tries`` (attempts, oldest first; the
    last that promoted it counts) promoted it, else None."""
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
    if not is_performance_reason(incident.reason):
        return incident
    # The try that promoted the serving champion may belong to an earlier incident (a concept that
    # keeps moving opens one after another): its training rows are in-sample wherever it ran.
    tries = attempts.for_incident(incident.id) + list(reversed(attempts.recent(50)))
    if incident.change_ts is None:  # a decline with no located step: its rows start after the last healthy window
        return _after_fit(incidents, incident, tries, champion)
    found = later_change(cfg, store, champion, incident.change_ts, lambda v: trained_until(tries, v))
    from monitor.daemon.runtime.views import iso
    if found is None:
        return _after_fit(incidents, incident, tries, champion)
    change, ts, version = found
    log.info("incident %s: later change point at %s on champion v%s's re-scored rows", incident.id, iso(ts), version)
    if change.rows_before == 0:  # below_own_figure: the concept moved on after the champion's training data
        what = (f"champion v{version}'s {change.metric} {change.after:.4f} on the {change.rows_after} labelled rows "
                f"after its training data, against {change.before:.4f} held out when it was promoted: the concept "
                "moved on")
    else:
        what = (f"{change.describe()} on the labelled rows since {iso(incident.change_ts)}, re-scored by champion "
                f"v{version}")
    return incidents.update(incident.id, "change_point",
                            f"performance changed again at {iso(ts)} ({what}); retraining data starts there",
                            change_ts=ts)


def _after_fit(incidents: IncidentStore, incident: Incident, tries: list[Attempt], champion: Scorer) -> Incident:
    """``incident`` with a change point located inside the rows the serving champion was fit to moved
    to their end, when an *earlier* incident's try promoted that champion; else unchanged. The
    champion fits those rows (they trained it), so the change this incident stands for came after
    them: a concept that keeps moving opens incident after incident, and a check's change point can
    fall before the newest champion's training data; retraining on every row since then learnt
    mostly an older state of the concept (rejected against the champion: bench_loop.py gradual,
    bench_tasks.py mc_gradual). A decline with no located step gets its change point there too: its
    retraining rows would start after the last healthy window, or when too few are there, be the most
    recent ``alerts.retrain_rows`` (5,000 rows reaching back into the champion's own training data);
    with the change point, the retrain waits for enough rows after the champion's data and learns
    from those. Within one incident the rows since its change are that change's evidence, and stay."""
    from monitor.daemon.runtime.views import iso
    try:
        version = str(champion.get().version)
    except DriftloopError:
        return incident
    promoter = next((a for a in reversed(tries)
                     if a.status == Outcome.PROMOTED and str(a.challenger_version) == version), None)
    if promoter is None or promoter.incident_id == incident.id:
        return incident
    end = trained_until([promoter], version)
    if end is None or (incident.change_ts is not None and end <= incident.change_ts):
        return incident
    moved = "moved" if incident.change_ts is not None else "set"
    log.info("incident %s: change point %s to %s, the end of champion v%s's training data", incident.id, moved,
             iso(end), version)
    return incidents.update(incident.id, "change_point",
                            f"change point {moved} to {iso(end)}, the end of champion v{version}'s training data "
                            f"(promoted by incident {promoter.incident_id}): the rows before it are the ones it was "
                            "fit to; retraining data starts there", change_ts=end)
