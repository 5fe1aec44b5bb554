"""The controller: turns checks and external triggers into incidents and retrains.

It owns the decisions; everything with a side effect is injected (check job, stores, policy,
retrain launcher, champion cache, registry probe, clock). One re-entrant lock serialises
decisions, so a check, an Alertmanager webhook and a finishing retrain never race on an incident.
What it did is an :class:`monitor.daemon.decisions.actions.Action` (a kind and its data); incidents
move only by the lifecycle's events (:mod:`monitor.daemon.decisions.lifecycle`). Built in floors:
:mod:`~monitor.daemon.runtime.moves`, :mod:`~monitor.daemon.runtime.retrains`,
:mod:`~monitor.daemon.runtime.settlement`, :mod:`~monitor.daemon.runtime.suspicion`, then this.
"""
from __future__ import annotations

import logging
import math

from monitor.daemon.runtime.checks import CheckOutcome
from monitor.daemon.state.incidents import Incident
from monitor.daemon.state.levels import Level
from monitor.daemon.decisions.actions import Action, ActionKind, StartKind
from monitor.daemon.decisions.breach import Observation, is_performance_reason, own_bar, selection_shift
from monitor.daemon.decisions.kinds import Outcome, Reason, State
from monitor.daemon.decisions.lifecycle import Event
from monitor.daemon.decisions.policy import Verdict
from monitor.daemon.decisions.rules import rule_inputs
from monitor.daemon.runtime.views import iso
from monitor.daemon.runtime.moves import CheckReport, ControllerStore, Invalidatable  # noqa: F401  (for callers)
from monitor.daemon.runtime.retrains import Started  # noqa: F401
from monitor.daemon.runtime.suspicion import Suspicion
from monitor.tasks import task_of

log = logging.getLogger(__name__)


def observation(outcome: CheckOutcome, reference: Level | None = None) -> Observation:
    r = outcome.judged
    reference = reference or Level()
    # An attainable level decided for this champion replaces its baseline (measured on the old concept);
    # otherwise its own figure counts at its held-out interval's end nearest a drop (breach.own_bar).
    bounds = getattr(r, "baseline_bounds", None)

    def base(own: float | None, level: float | None, figure: str) -> float | None:
        if reference.attainable:
            return own if level is None else level
        return own_bar(figure, own, level, bounds)
    upper = lambda ci: ci[1] if ci else None  # noqa: E731
    lower = lambda ci: ci[0] if ci else None  # noqa: E731
    return Observation(labelled_rows=outcome.labelled_rows, task=getattr(r, "task", "binary"),
                       judged_rows=(None if outcome.labels_end is None
                                    else (outcome.labelled_rows, outcome.labels_end)),
                       accuracy=r.accuracy, roc_auc=r.roc_auc,
                       baseline_accuracy=base(r.baseline_accuracy, reference.accuracy, "accuracy"),
                       baseline_roc_auc=base(r.baseline_roc_auc, reference.roc_auc, "roc_auc"),
                       dataset_drift=bool(r.dataset_drift), champion_version=outcome.champion_version,
                       window_rows=outcome.window_rows, reference_accuracy=reference.accuracy,
                       reference_roc_auc=reference.roc_auc, change=outcome.change,
                       estimated_accuracy=getattr(r, "estimated_accuracy", None),
                       estimated_accuracy_upper=upper(getattr(r, "estimated_accuracy_ci", None)),
                       estimated_roc_auc=getattr(r, "estimated_roc_auc", None),
                       estimated_roc_auc_upper=upper(getattr(r, "estimated_roc_auc_ci", None)),
                       segments=tuple(getattr(r, "segments", None) or ()),
                       mae=getattr(r, "mae", None),
                       baseline_mae=base(getattr(r, "baseline_mae", None), reference.mae, "mae"),
                       reference_mae=reference.mae, estimated_mae=getattr(r, "estimated_mae", None),
                       estimated_mae_lower=lower(getattr(r, "estimated_mae_ci", None)),
                       accuracy_upper=upper(getattr(r, "accuracy_ci", None)),
                       roc_auc_upper=upper(getattr(r, "roc_auc_ci", None)),
                       minority_rows=minority_rows(outcome.labelled_rows, getattr(r, "positive_rate", None)),
                       mae_lower=lower(getattr(r, "mae_ci", None)),
                       labelled_estimate=labelled_estimate(r),
                       rows_after_labels=(outcome.labels_end is not None and outcome.window_end is not None
                                          and outcome.window_end > outcome.labels_end),
                       min_labels=r.min_labels if getattr(r, "min_labels_auto", None) is not None else None,
                       # An attainable level was measured on labelled rows chosen as these are: it does not move.
                       selection={} if reference.attainable else selection_shift(r),
                       **rule_inputs(r))


def minority_rows(labelled: int, positive_rate: float | None) -> int | None:
    """A binary window's labelled rows of its rarer class (None for other tasks: no positive rate)."""
    if positive_rate is None or not math.isfinite(positive_rate):
        return None
    return int(round(labelled * min(positive_rate, 1.0 - positive_rate)))


def labelled_estimate(result: object) -> float | None:
    """The estimate of the task's headline figure on the window's labelled rows alone
    (``CheckResult.estimation_check``): what tells labels from before a drop (policy)."""
    check = getattr(result, "estimation_check", None) or {}
    figure = task_of(getattr(result, "task", None) or "binary").primary_metric
    value = check.get("estimated") if check.get("figure") == figure else None
    return float(value) if isinstance(value, (int, float)) else None


class Controller(Suspicion):
    """Checks in, incidents and retrains out (the floors below: :mod:`monitor.daemon.runtime.moves`)."""

    # -- checks ---------------------------------------------------------------------------
    def run_check(self) -> CheckReport:
        outcome = self.check_job.run()
        with self.lock:
            if outcome.status != "ok":
                outcome.id = self.checklog.record(outcome)
                # Said once at INFO when it starts; a repeat every interval would drown the log.
                repeated = self.last_check is not None and self.last_check.outcome.status == outcome.status
                level = logging.ERROR if outcome.status == "error" else logging.DEBUG if repeated else logging.INFO
                log.log(level, "check %s: %s", outcome.status, outcome.message)
                report = CheckReport(outcome, None, self.incidents.current(),
                                     Action(ActionKind.CHECK_NOT_OK, detail=outcome.message))
            else:
                self.last_result = outcome.result
                if self.estimation is not None:  # labels keep proving the estimate wrong: recalibrate it
                    self.estimation.observe(outcome, self.incidents)
                self.last_versions = outcome.versions
                self._reference = self.levels.current(outcome)  # once per check: it may write
                verdict = self.policy.observe(observation(outcome, self._reference))
                # Recorded with its verdict in one write: a reader never sees a half-made decision.
                outcome.id = self.checklog.record(outcome, verdict.message)
                action = self._act(outcome, verdict)
                log.info("check: %d rows, %d labelled; %s; %s", outcome.window_rows, outcome.labelled_rows,
                         verdict.message, action)
                report = CheckReport(outcome, verdict, self.incidents.current(), action)
            self.last_check = report
        if self.shadow is not None and outcome.status == "ok":
            self._observe_shadow()
        return report


    def _act(self, outcome: CheckOutcome, verdict: Verdict) -> Action:
        if verdict.performance_known and not any(b.reason != "drift" for b in verdict.breaches):
            # What was judged healthy ends at the newest labelled row: rows after it (labels not in yet,
            # with late labels the next concept's first batch) were not judged, and a retrain without a
            # located change point takes its rows from here.
            self._last_healthy_end = outcome.labels_end if outcome.labels_end is not None else outcome.window_end
        current = self.incidents.current()
        if current is None:
            self._healthy_streak = 0
            if not verdict.fire:
                return self._open_suspected(outcome, verdict) if verdict.suspect else Action(ActionKind.NONE)
            performance = is_performance_reason(verdict.reason)
            assert verdict.reason is not None  # a firing verdict names its reason
            if verdict.reason == Reason.DRIFT:
                continued = self._continue_drift(outcome, verdict)
                if continued is not None:
                    return continued
            incident = self.incidents.open(
                verdict.reason, "alert", verdict.message, check_id=outcome.id, report_paths=outcome.report_paths,
                window_start=self._last_healthy_end, retrain=verdict.retrain,
                change_ts=outcome.change_ts if performance else None,
                reference=(self._reference.accuracy, self._reference.roc_auc),
                drifted_checks=verdict.drift.drifted_checks if verdict.reason == Reason.DRIFT else 0)
            incident = self._keep_reports(incident)
            self._note_drifted_rows(incident.id, outcome)
            log.warning("incident %s opened: %s", incident.id, verdict.message)
            if not verdict.retrain:
                return Action(ActionKind.OPENED, incident.id, incident.state,
                              detail="no retrain: alerts.retrain_on_drift is off")
            return self.maybe_retrain(incident, "alert").action(ActionKind.OPENED, incident)
        if current.state == State.SUSPECTED:
            return self._judge_suspected(current, outcome, verdict)
        if current.state == State.PROMOTED and self._judged_its_predecessor(current, outcome):
            # A check that began before the promotion judged the champion it replaced: neither its
            # breach nor its health is the new champion's (episode: a breach of v2 re-armed v1's wait).
            return Action(ActionKind.OPEN, current.id, current.state,
                          detail=f"the check judged v{outcome.champion_version}, replaced while it ran")
        if self.queued_request(current):
            return self._retry_request(current)
        current = self._follow_evidence(current, outcome, verdict)
        if verdict.drift.drifted and verdict.drift.active and current.reason == Reason.DRIFT:
            current = self.incidents.count_drifted(current.id)  # one continuing drift: one incident, counted
        impactless = self._drift_without_impact(current, verdict)
        if impactless is not None:
            return impactless
        healthy = self._healthy_for(current, verdict)
        if healthy:
            self._healthy_streak += 1
            need = self.cfg.alerts.healthy_windows
            if current.state == State.RETRAINING:
                return Action(ActionKind.HEALTHY_WHILE_RETRAINING, current.id, current.state)
            if self._healthy_streak >= need:
                self.resolve(current, f"healthy for {self._healthy_streak} window(s): {verdict.message}")
                return Action(ActionKind.RESOLVED, current.id, current.state)
            return Action(ActionKind.HEALTHY_PROGRESS, current.id, current.state, progress=(self._healthy_streak, need))
        if healthy is False:
            self._healthy_streak = 0
        if current.retrain and (current.state in (State.FIRING, State.WAITING)
                                or (verdict.fire and any(is_performance_reason(r) for r in verdict.firing))
                                or (verdict.fire and not is_performance_reason(current.reason))):
            # firing/waiting: the breach that opened it stands until a healthy check says otherwise.
            # promoted/rejected/failed: only a breach measured on the current champion moves it on.
            return self.maybe_retrain(current, "alert").action(ActionKind.STILL_BREACHING, current)
        if current.state == State.PROMOTED and healthy is None and not verdict.performance_known:
            return self._await_judgement(current, outcome, verdict)
        return Action(ActionKind.OPEN, current.id, current.state, healthy=healthy)

    def _retry_request(self, incident: Incident) -> Action:
        """A person's or the schedule's retrain that waits for a retrain slot (``queued_request``) is
        tried again as asked at each check, healthy or not: the check does not resolve a request.
        Once it can no longer start for another reason (too few rows), it ends as a declined request."""
        started = self.maybe_retrain(incident, incident.trigger, respect_cooldown=False,
                                     ignore_attempt_limit=incident.trigger == "manual")
        if started.kind == StartKind.DEFERRED:
            self.resolve(self.incidents.get(incident.id), f"{incident.reason} retrain not started: {started}")
        return started.action(ActionKind.STILL_BREACHING, incident)

    def _continue_drift(self, outcome: CheckOutcome, verdict: Verdict) -> Action | None:
        """One drift, one incident (issue 34): a drift firing with no incident open continues the
        drift incident resolved last, when it was touched within ``alerts.drift_reopen_seconds``.
        While the episode it stood for goes on (it was resolved without performance impact, or by
        hand), the drift is counted on it and it stays resolved; a new episode reopens it (the
        lifecycle's ``reopen``, with its event). None: open a new incident."""
        window = self.cfg.alerts.drift_reopen_seconds
        last = self.incidents.last_resolved(Reason.DRIFT) if window > 0 else None
        if last is None or self.clock() - last.updated_at > window:
            return None
        episode = verdict.drift
        if not episode.onset:
            last = self.incidents.count_drifted(last.id)
            self.incidents.note(last.id, "drift_continues", f"the drift goes on: {last.drifted_checks} drifted checks",
                                data={"drifted_checks": last.drifted_checks, "check_id": outcome.id}, coalesce=True)
            return Action(ActionKind.DRIFT_CONTINUES, last.id, last.state)
        incident = self.move(last.id, Event.REOPEN, f"reopened: the drift is back: {verdict.message}",
                             data={"check_id": outcome.id, "drifted_checks": last.drifted_checks})
        incident = self.incidents.count_drifted(incident.id, episode.drifted_checks)
        self._note_drifted_rows(incident.id, outcome)
        log.warning("incident %s reopened: %s", incident.id, verdict.message)
        if not (incident.retrain and verdict.retrain):
            return Action(ActionKind.REOPENED, incident.id, incident.state,
                          detail="no retrain: alerts.retrain_on_drift is off")
        return self.maybe_retrain(incident, "alert").action(ActionKind.REOPENED, incident)

    def _judged_its_predecessor(self, incident: Incident, outcome: CheckOutcome) -> bool:
        """Whether ``outcome``, begun before the incident's last promotion ended, judged another version."""
        promoted = [a for a in self.attempts.for_incident(incident.id) if a.status == Outcome.PROMOTED]
        last = promoted[-1] if promoted else None
        return (last is not None and last.finished_at is not None and outcome.ts < last.finished_at
                and str(last.challenger_version) != str(outcome.champion_version))

    def _await_judgement(self, incident: Incident, outcome: CheckOutcome, verdict: Verdict) -> Action:
        """A promoted champion is judged once it has ``drift.min_labels`` labelled rows of its own
        (auto: resolved for it, ``verdict.labels``); with labels arriving late that takes several
        checks. Say what the incident waits for (its detail and one coalesced event), with the
        label-free estimate when it suspects a drop.

        Meanwhile the labelled rows after the champion's training data, re-scored, may already show
        that the concept moved on (a gradual drift): then the incident retries at once, as if its
        new champion breached (``rescan.follow``; the retry rules decide whether it starts)."""
        moved = self._moved_on(incident)
        if moved is not None:
            return self.maybe_retrain(moved, "alert").action(ActionKind.STILL_BREACHING, moved)
        have, need = verdict.labels
        wait = (f"waiting for {max(0, need - have)} more labelled rows of champion v{outcome.champion_version} "
                f"to judge it ({have}/{need}; drift.min_labels)")
        if verdict.suspected:
            wait += "; estimated from its scores: " + "; ".join(b.describe() for b in verdict.suspected)
        self.incidents.note(incident.id, "awaiting_judgement", wait, coalesce=True)
        self.incidents.set_fields(incident.id, detail=wait)
        return Action(ActionKind.AWAITING_JUDGEMENT, incident.id, incident.state, progress=(have, need), detail=wait)

    def _moved_on(self, incident: Incident) -> Incident | None:
        """``incident`` with a later change point when the re-scored rows after its promoted
        champion's training data show one (a step, or all of them below its own held-out figure),
        else None. Never raises: the wait for the champion's own labels stands."""
        if not self._after_promotion(incident):
            return None
        moved = self._follow_after_promotion(incident)
        return moved if moved.change_ts != incident.change_ts else None

    def _follow_evidence(self, current: Incident, outcome: CheckOutcome, verdict: Verdict) -> Incident:
        """An open incident's facts follow the newest evidence: a data-drift incident that now
        breaches on performance becomes a performance incident (and retrains); a later change
        point in the current champion's rows moves the start of the retraining data."""
        perf_firing = [r for r in verdict.firing if is_performance_reason(r)]
        if verdict.fire and perf_firing and current.reason == Reason.DRIFT:
            current = self.incidents.update(current.id, "reason_changed",
                                            f"now a {perf_firing[0]} incident: {verdict.message}",
                                            reason=perf_firing[0], retrain=True,
                                            change_ts=outcome.change_ts)
        elif verdict.fire and verdict.retrain and not current.retrain:
            self.incidents.note(current.id, "escalated", f"now retrain-worthy: {verdict.message}")
            self.incidents.set_retrain(current.id)
            current = self.incidents.get(current.id)
        if (perf_firing and outcome.change_ts is not None and current.state != State.RETRAINING
                and (current.change_ts is None or outcome.change_ts > current.change_ts)):
            step = outcome.change.describe() if outcome.change is not None else "a step"
            current = self.incidents.update(
                current.id, "change_point",
                f"performance changed at {iso(outcome.change_ts)} ({step} on champion "
                f"v{outcome.champion_version}'s rows); retraining data starts there",
                change_ts=outcome.change_ts)
        return current


    def _drift_without_impact(self, incident: Incident, verdict: Verdict) -> Action | None:
        """A data-drift incident (no retrain asked) whose model keeps performing: drift goes on, but
        the labelled performance stays within thresholds for ``alerts.drift_impact_windows`` judged
        checks in a row. It is resolved as drift without performance impact (its reports stay with
        it), instead of sitting open for as long as the new normal lasts. None: not that case."""
        if incident.reason != Reason.DRIFT or incident.retrain or verdict.healthy_for("drift"):
            self._impactless_streak = 0
            return None
        if not verdict.performance_known:
            return None  # not judged: the streak neither grows nor breaks
        if not verdict.healthy_for("performance"):
            self._impactless_streak = 0
            return None
        self._impactless_streak += 1
        need = self.cfg.alerts.drift_impact_windows
        if self._impactless_streak < need:
            return Action(ActionKind.NO_IMPACT_PROGRESS, incident.id, incident.state,
                          progress=(self._impactless_streak, need))
        self.resolve(incident, f"drift without performance impact: performance within thresholds on "
                               f"{self._impactless_streak} judged window(s) in a row ({verdict.message})")
        return Action(ActionKind.RESOLVED_NO_IMPACT, incident.id, incident.state)

    @staticmethod
    def _healthy_for(incident: Incident, verdict: Verdict) -> bool | None:
        if incident.reason == Reason.DRIFT and not incident.retrain:
            return verdict.healthy_for("drift")
        return verdict.healthy_for("performance")
