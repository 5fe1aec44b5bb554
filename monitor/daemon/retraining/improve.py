"""Improvement retrains: a champion left below the reference level keeps being improved.

An incident resolves once the champion is within the alert thresholds of the reference level, and
then nothing retrained any more: on a long concept switch the champion sat 2-3 points below the
level it once reached for 10,000 rows, because each retrain had learnt from the few rows there were
when it ran. The evidence keeps growing after the incident; so, after every successful check with no
incident open, :class:`Improvement` asks:

- is the champion *materially* below the reference level (the level the loop once reached, or
  the attainable level it decided after a change of concept; ``monitor.daemon.state.levels``)? Its
  realised figure's whole interval on the check's labelled rows is short of it by more than
  ``training.improve_margin`` (2/3) of the alert threshold (accuracy: the upper end more than 2
  points below the level with the default 3-point ``alerts.accuracy_drop``; regression: the MAE's
  lower end more than 2/3 of ``alerts.mae_rise`` above it), with at least ``drift.min_labels``
  labelled rows. Noise, or a champion within reach of its level, never starts one;
- has the evidence grown? The labelled rows since the last performance incident's change point
  are at least ``training.evidence_growth`` (4) times what the last retrain of that change learnt
  from, and ``drift.min_labels`` more;
- fewer than ``training.improve_below_reference`` improvement retrains for that change so far.

Then it opens an incident of reason ``improve`` (``trigger`` schedule, the change point of the
incident it follows) and retrains on every labelled row since the change (``training.max_rows``
newest), through the same gate as any retrain: the gate's significant-gain rule
(``training.gate.significant_gain``) measures the challenger against what the champion falls short
of. The incident resolves when its retrain ends, whatever the outcome (a requested reason). The
bound and the doubling keep it to a few retrains per change: promotions stay rare, and a champion
at its level is never touched. Runs on the leader after each check; never raises.
"""
from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

import pandas as pd

from monitor.daemon.decisions.breach import (is_performance_reason, lower_is_better, moved_bar, selection_shift,
                                             worsening)
from monitor.daemon.decisions.kinds import Reason
from monitor.tasks import task_of

if TYPE_CHECKING:
    from monitor.daemon.runtime.controller import CheckReport, Controller
    from monitor.daemon.state.incidents import Incident

log = logging.getLogger(__name__)

REASON = Reason.IMPROVE


def shortfall(figure: str, value: float | None, interval: Any, level: float | None, margin: float = 0.0,
              mode: str = "absolute") -> str | None:
    """Why the champion's realised ``figure`` is materially short of ``level`` (one line), or None:
    even the interval's end nearest the level (``interval``: ``(low, high)``) is worse than it by more
    than ``margin`` (a drop, or for an error a rise, in ``mode`` as the alerts measure it). Noise, or a
    small shortfall, never starts a retrain."""
    if level is None or value is None or not interval or not all(
            isinstance(v, (int, float)) and math.isfinite(v) for v in (value, level, *interval)):
        return None
    low, high = float(interval[0]), float(interval[1])
    lower = lower_is_better(figure)
    worse = worsening(figure, low if lower else high, level, "relative" if lower else mode)
    if not worse > margin + 1e-12:
        return None
    side = "above" if lower else "below"
    return (f"{figure} {value:.4g} [{low:.4g}, {high:.4g}] is {side} the reference level {level:.4g} by more than "
            f"{margin:.4g}")


class Improvement:
    def __init__(self, ctl: Controller):
        self.ctl = ctl
        self.cfg = ctl.cfg
        self.last: str | None = None  # what the latest improvement decision was, one line

    def after_check(self, report: CheckReport) -> str | None:
        """Start an improvement retrain when one is due (module doc). Never raises."""
        if self.cfg.training.improve_below_reference <= 0 or report.outcome.status != "ok" or report.incident:
            return None
        try:
            return self._maybe_start(report)
        except Exception as exc:  # the check stands whatever happens; the next one asks again
            log.warning("improvement retrain not considered: %s", exc, exc_info=True)
            return None

    def _change(self) -> Incident | None:
        """The newest incident with a located change point of the champion's concept: a performance
        incident, or an improvement that followed one."""
        for incident in self.ctl.incidents.recent(50):
            if incident.change_ts is not None and (is_performance_reason(str(incident.reason))
                                                   or incident.reason == REASON):
                return incident
        return None

    def _short(self, report: CheckReport) -> str | None:
        r = report.outcome.judged
        if r is None or report.outcome.labelled_rows < r.min_labels:  # drift.min_labels (auto: resolved)
            return None
        figure, threshold, mode = task_of(self.cfg.model).default_rules(self.cfg.alerts)[0]
        stored = self.ctl.levels.read() or {}
        level = stored.get(f"reference_{figure}")
        shift = selection_shift(r).get(figure)  # labels chosen by the score: the labelled rows' own level
        if level is not None and shift is not None and "reference_attainable_version" not in stored:
            level = moved_bar(figure, level, shift)
        return shortfall(figure, getattr(r, figure, None), getattr(r, f"{figure}_ci", None),
                         level, self.cfg.training.improve_margin * threshold, mode)

    def _maybe_start(self, report: CheckReport) -> str | None:
        ctl, limit = self.ctl, self.cfg.training.improve_below_reference
        with ctl.lock:
            if ctl.incidents.current() is not None or ctl.supervisor.busy or ctl.attempts.running() is not None:
                return None
            short = self._short(report)
            change = self._change() if short else None
            if short is None or change is None:
                return None
            assert change.change_ts is not None  # _change picks one with a change point
            family = [i for i in ctl.incidents.recent(50) if i.change_ts == change.change_ts]
            done = sum(1 for i in family if i.reason == REASON)
            if done >= limit:
                return None
            learnt = max((int((a.data_window or {}).get("rows") or 0)
                          for i in family for a in ctl.attempts.for_incident(i.id)), default=0)
            since = pd.Timestamp(change.change_ts, unit="s", tz="UTC").round("us")
            have = ctl.store.labelled_count(since=since)
            # drift.min_labels (auto: resolved) more at least
            need = max(int(self.cfg.training.evidence_growth * learnt), learnt + ctl.policy.min_labels)
            if have < need:
                self.last = (f"champion v{report.outcome.champion_version}: {short}; improvement retrain after "
                             f"{need} labelled rows since the change ({have} now)")
                return None
            detail = (f"improvement {done + 1}/{limit}: champion v{report.outcome.champion_version}'s {short}; "
                      f"{have} labelled rows since the change at {since.isoformat()} (the last retrain learnt from "
                      f"{learnt})")
            incident = ctl.incidents.open(REASON, "schedule", detail, check_id=report.outcome.id, retrain=True,
                                          change_ts=change.change_ts,
                                          data={"follows": change.id, "rows": have, "learnt": learnt})
            log.warning("incident %s opened: %s", incident.id, detail)
            started = ctl.maybe_retrain(incident, "schedule", respect_cooldown=False)
            if started.attempt is None:
                ctl.resolve(ctl.incidents.get(incident.id), f"improvement retrain not started: {started}")
            self.last = detail + f"; {started}"
            return self.last
