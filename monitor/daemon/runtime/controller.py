"""The controller: turns checks and external triggers into incidents and retrains.

It owns the decisions; everything with a side effect is injected (check job, stores, policy,
retrain launcher, champion cache, registry probe, clock). One re-entrant lock serialises
decisions, so a check, an Alertmanager webhook and a finishing retrain never race on an incident.
"""
from __future__ import annotations

import logging
import shutil
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

import pandas as pd
from sqlalchemy.engine import Engine

from monitor.config import DriftloopConfig
from monitor.daemon.runtime import rescan
from monitor.daemon.state.attempts import Attempt, AttemptStore, BusyError
from monitor.daemon.state.checklog import CheckLog
from monitor.daemon.runtime.checks import CheckJob, CheckOutcome, WindowSource
from monitor.daemon.retraining.failover import stopped_with_its_daemon
from monitor.daemon.state.incidents import OUTCOME_STATES, Incident, IncidentStore, TransitionError
from monitor.daemon.retraining.launcher import ChildResult, Launcher, RetrainJob
from monitor.daemon.state.levels import Level, ReferenceLevels
from monitor.daemon.decisions.breach import Observation, is_performance_reason
from monitor.daemon.decisions.policy import AlertPolicy, Verdict, cooldown_remaining
from monitor.daemon.decisions.post_change import post_change_need
from monitor.daemon.retraining.registry import RegistryProbe, promoted_version
from monitor.daemon.decisions.rules import rule_inputs
from monitor.daemon.runtime.status import iso
from monitor.daemon.retraining.supervisor import RetrainSupervisor
from monitor.errors import DriftloopError

if TYPE_CHECKING:  # trainer (torch) is loaded only when a shadow is configured
    from trainer.shadow import ShadowNews

log = logging.getLogger(__name__)


@dataclass
class CheckReport:
    outcome: CheckOutcome
    verdict: Verdict | None
    incident: Incident | None   # the open incident after this check, if any
    action: str                 # what the controller did, one line


@dataclass
class Started:
    attempt: Attempt | None     # None: the retrain did not start, ``message`` says why
    message: str

    def __str__(self) -> str:
        return self.message


def observation(outcome: CheckOutcome, reference: Level | None = None) -> Observation:
    r = outcome.result
    reference = reference or Level()
    upper = lambda ci: ci[1] if ci else None  # noqa: E731
    lower = lambda ci: ci[0] if ci else None  # noqa: E731
    return Observation(labelled_rows=outcome.labelled_rows, task=getattr(r, "task", "binary"),
                       accuracy=r.accuracy, roc_auc=r.roc_auc,
                       baseline_accuracy=r.baseline_accuracy, baseline_roc_auc=r.baseline_roc_auc,
                       dataset_drift=bool(r.dataset_drift), champion_version=outcome.champion_version,
                       window_rows=outcome.window_rows, reference_accuracy=reference.accuracy,
                       reference_roc_auc=reference.roc_auc, change=outcome.change,
                       estimated_accuracy=getattr(r, "estimated_accuracy", None),
                       estimated_accuracy_upper=upper(getattr(r, "estimated_accuracy_ci", None)),
                       estimated_roc_auc=getattr(r, "estimated_roc_auc", None),
                       estimated_roc_auc_upper=upper(getattr(r, "estimated_roc_auc_ci", None)),
                       segments=tuple(getattr(r, "segments", None) or ()),
                       mae=getattr(r, "mae", None), baseline_mae=getattr(r, "baseline_mae", None),
                       reference_mae=reference.mae, estimated_mae=getattr(r, "estimated_mae", None),
                       estimated_mae_lower=lower(getattr(r, "estimated_mae_ci", None)),
                       accuracy_upper=upper(getattr(r, "accuracy_ci", None)),
                       mae_lower=lower(getattr(r, "mae_ci", None)),
                       **rule_inputs(r))


def unsuccessful_in_a_row(tries: list[Attempt]) -> int:
    """Rejected or failed attempts since the last promotion (running ones not counted)."""
    n = 0
    for a in reversed(tries):
        if a.status == "promoted":
            break
        if a.status in ("rejected", "failed"):
            n += 1
    return n


class ControllerStore(WindowSource, Protocol):
    """What the controller reads from the store (:class:`monitor.store.PredictionStore`)."""

    engine: Engine  # the daemon's own tables (incidents, attempts, levels) live beside the records

    def labelled_count(self, since: Any = None, received_after: float | None = None) -> int: ...

    def last_label_time(self) -> datetime | None: ...  # read by the daemon's metrics


class Invalidatable(Protocol):
    """The champion cache (:class:`monitor.daemon.retraining.champion.ChampionCache`): dropped after a promotion."""

    def invalidate(self, version: str | None = None) -> None: ...

    def get(self) -> Any: ...  # the champion (trainer Champion), to re-score rows (monitor.daemon.runtime.rescan)


class Controller:
    def __init__(self, cfg: DriftloopConfig, store: ControllerStore, check_job: CheckJob, checklog: CheckLog,
                 incidents: IncidentStore, attempts: AttemptStore, policy: AlertPolicy, launcher: Launcher,
                 champion: Invalidatable, probe: RegistryProbe, clock: Callable[[], float],
                 shadow: Callable[[pd.DataFrame], ShadowNews | None] | None = None, estimation: Any = None):
        self.cfg = cfg
        # training.shadow.windows: each successful check's window goes to the pending shadow
        # challenger (trainer.shadow.observe), outside the lock; it may move the champion alias.
        self.shadow = shadow
        self.estimation = estimation  # estimation_watch.EstimationWatch: recalibrates the estimate
        self.last_shadow: str | None = None
        self.store = store
        self.check_job = check_job
        self.checklog = checklog
        self.incidents = incidents
        self.attempts = attempts
        self.policy = policy
        self.champion = champion
        self.probe = probe
        self.clock = clock
        self.lock = threading.RLock()
        self.supervisor = RetrainSupervisor(attempts, launcher, self.settle, cfg.alerts.retrain_timeout_seconds)
        self.last_check: CheckReport | None = None
        self.last_result: Any = None  # the latest successful check's CheckResult
        self.unrecorded_errors = 0    # checks that failed so badly not even their row could be written
        self._healthy_streak = 0
        self._impactless_streak = 0  # judged windows in a row a drift incident's model performed well
        self._last_healthy_end: float | None = None
        self.last_versions: dict[str, Any] = {}
        self.levels = ReferenceLevels(store.engine, cfg.model.name)
        self._reference = Level()  # the level of the check being acted on

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
                report = CheckReport(outcome, None, self.incidents.current(), outcome.message)
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

    def _observe_shadow(self) -> None:
        try:
            news = self.shadow(self.check_job.current_window()) if self.shadow else None
        except DriftloopError as exc:  # the registry or the store is down: the next check tries again
            log.warning("shadow challenger not observed: %s", exc)
            return
        if news is None:
            held = self.attempts.in_shadow()
            if held is not None and held.challenger_version:  # its shadow ended outside the daemon
                self._end_shadow(held.challenger_version, "rejected", "the shadow is no longer pending")
            return
        self.last_shadow = news.message
        log.info("%s", news.message)
        if news.ended:
            self._end_shadow(news.version, "promoted" if news.kind == "promoted" else "rejected", news.message)

    def _end_shadow(self, version: str, status: str, message: str) -> None:
        """A shadow's verdict settles the attempt that held it and moves its incident, as any
        promotion or rejection does: a promoted shadow is a promotion by the loop (the reference
        level stays, see monitor.daemon.state.levels) and resets the alert streaks."""
        with self.lock:
            attempt = self.attempts.end_shadow(version, status, message)
            if status == "promoted":
                self.champion.invalidate(version)
                self.policy.reset()
                self._healthy_streak = 0
            if attempt is None:
                return
            try:
                self.incidents.transition(attempt.incident_id, status, message, version=version,
                                          outcome_reasons=attempt.reasons)
            except TransitionError as exc:  # resolved meanwhile, or moved on to another attempt
                log.info("%s", exc)

    def _act(self, outcome: CheckOutcome, verdict: Verdict) -> str:
        if verdict.performance_known and not any(b.reason != "drift" for b in verdict.breaches):
            self._last_healthy_end = outcome.window_end
        current = self.incidents.current()
        if current is None:
            self._healthy_streak = 0
            if not verdict.fire:
                return self._open_suspected(outcome, verdict) if verdict.suspect else "no incident"
            performance = is_performance_reason(verdict.reason)
            assert verdict.reason is not None  # a firing verdict names its reason
            incident = self.incidents.open(
                verdict.reason, "alert", verdict.message, check_id=outcome.id, report_paths=outcome.report_paths,
                window_start=self._last_healthy_end, retrain=verdict.retrain,
                change_ts=outcome.change_ts if performance else None,
                reference=(self._reference.accuracy, self._reference.roc_auc))
            incident = self._keep_reports(incident)
            log.warning("incident %s opened: %s", incident.id, verdict.message)
            if not verdict.retrain:
                return f"opened incident {incident.id} (no retrain: alerts.retrain_on_drift is off)"
            return f"opened incident {incident.id}; {self.maybe_retrain(incident, 'alert')}"
        if current.state == "suspected":
            return self._judge_suspected(current, outcome, verdict)
        current = self._follow_evidence(current, outcome, verdict)
        impactless = self._drift_without_impact(current, verdict)
        if impactless is not None:
            return impactless
        healthy = self._healthy_for(current, verdict)
        if healthy:
            self._healthy_streak += 1
            need = self.cfg.alerts.healthy_windows
            if current.state == "retraining":
                return f"incident {current.id}: healthy window while retraining"
            if self._healthy_streak >= need:
                self._resolve(current, f"healthy for {self._healthy_streak} window(s): {verdict.message}")
                return f"resolved incident {current.id}"
            return f"incident {current.id}: healthy {self._healthy_streak}/{need}"
        if healthy is False:
            self._healthy_streak = 0
        if current.retrain and (current.state in ("firing", "waiting")
                                or (verdict.fire and any(is_performance_reason(r) for r in verdict.firing))
                                or (verdict.fire and not is_performance_reason(current.reason))):
            # firing/waiting: the breach that opened it stands until a healthy check says otherwise.
            # promoted/rejected/failed: only a breach measured on the current champion moves it on.
            return f"incident {current.id} ({current.state}) still breaching; {self.maybe_retrain(current, 'alert')}"
        if current.state == "promoted" and healthy is None and not verdict.performance_known:
            return self._await_judgement(current, outcome, verdict)
        return f"incident {current.id} ({current.state}) open; {'unknown health' if healthy is None else 'unhealthy'}"

    def _await_judgement(self, incident: Incident, outcome: CheckOutcome, verdict: Verdict) -> str:
        """A promoted champion is judged once it has ``drift.min_labels`` labelled rows of its own;
        with labels arriving late that takes several checks. Say what the incident waits for (its
        detail and one coalesced event), with the label-free estimate when it suspects a drop."""
        need = self.cfg.drift.min_labels
        have = outcome.labelled_rows
        wait = (f"waiting for {max(0, need - have)} more labelled rows of champion v{outcome.champion_version} "
                f"to judge it ({have}/{need}; drift.min_labels)")
        if verdict.suspected:
            wait += "; estimated from its scores: " + "; ".join(b.describe() for b in verdict.suspected)
        self.incidents.note(incident.id, "awaiting_judgement", wait, coalesce=True)
        self.incidents.set_fields(incident.id, detail=wait)
        return f"incident {incident.id} (promoted): {wait}"

    # -- the early warning: suspected incidents ---------------------------------------------
    def _open_suspected(self, outcome: CheckOutcome, verdict: Verdict) -> str:
        """An estimated drop with its band clear of the threshold, before labels can judge: alert
        (state ``suspected``), retrain only with ``alerts.retrain_on_estimate``."""
        first = verdict.suspected[0]
        retrain = self.cfg.alerts.retrain_on_estimate
        incident = self.incidents.open(
            first.reason, "alert", verdict.message, check_id=outcome.id, report_paths=outcome.report_paths,
            window_start=self._last_healthy_end, retrain=retrain,
            reference=(self._reference.accuracy, self._reference.roc_auc),
            state="suspected", data={"estimated": {b.reason: b.value for b in verdict.suspected},
                                     "bound": {b.reason: b.bound for b in verdict.suspected}})
        incident = self._keep_reports(incident)
        log.warning("incident %s suspected (no labels yet): %s", incident.id, verdict.message)
        if not retrain:
            return (f"opened suspected incident {incident.id} (waiting for labels to confirm; "
                    "alerts.retrain_on_estimate is off)")
        return f"opened suspected incident {incident.id}; {self.maybe_retrain(incident, 'alert')}"

    def _judge_suspected(self, current: Incident, outcome: CheckOutcome, verdict: Verdict) -> str:
        """Labels decide a suspected incident: a sustained breach confirms it (it goes on as a
        firing incident), a healthy labelled check clears it; the realised-vs-estimated error goes
        on the event. Without labels, an estimate back within thresholds for ``healthy_windows``
        checks clears it too."""
        if verdict.performance_known:
            data = self._estimate_error(current, outcome.result)
            perf_firing = [r for r in verdict.firing if is_performance_reason(r)]
            if verdict.fire and perf_firing:
                incident = self.incidents.transition(current.id, "firing", f"confirmed by labels: {verdict.message}",
                                                     data=data)
                incident = self.incidents.update(incident.id, "confirmed", f"now a {perf_firing[0]} incident",
                                                 reason=perf_firing[0], retrain=True, change_ts=outcome.change_ts)
                log.warning("incident %s confirmed by labels: %s", incident.id, verdict.message)
                return f"confirmed suspected incident {incident.id}; {self.maybe_retrain(incident, 'alert')}"
            if verdict.healthy_for("performance"):
                self.incidents.transition(current.id, "resolved", f"cleared by labels: {verdict.message}", data=data)
                self._healthy_streak = 0
                log.info("incident %s cleared by labels: %s", current.id, verdict.message)
                return f"cleared suspected incident {current.id}"
            return f"incident {current.id} (suspected): labels breach, not yet sustained"
        if verdict.suspect:
            self._healthy_streak = 0
            self.incidents.note(current.id, "still_suspected", "estimated drop persists; waiting for labels",
                                dedupe=True)
            return f"incident {current.id} (suspected): estimated drop persists, waiting for labels"
        if verdict.healthy.get("estimate"):
            self._healthy_streak += 1
            need = self.cfg.alerts.healthy_windows
            if self._healthy_streak >= need:
                self._resolve(current, f"cleared: estimate within thresholds for {self._healthy_streak} window(s): "
                                       f"{verdict.message}")
                return f"cleared suspected incident {current.id}"
            return f"incident {current.id} (suspected): estimate healthy {self._healthy_streak}/{need}"
        return f"incident {current.id} (suspected): waiting for labels"

    def _estimate_error(self, incident: Incident, result: Any) -> dict[str, Any]:
        """How far the estimate was from what the labels say, for the incident's event trail
        (accuracy; a regression model's MAE)."""
        metric = "mae" if getattr(result, "task", "binary") == "regression" else "accuracy"
        opened = next((e for e in self.incidents.events(incident.id) if e["kind"] == "opened"), None)
        at_opening = ((opened or {}).get("data") or {}).get("estimated", {}).get(metric)
        realised = getattr(result, metric)
        return {f"estimated_{metric}_at_opening": at_opening, f"realised_{metric}": realised,
                "error_vs_opening": None if at_opening is None or realised is None else realised - at_opening,
                f"estimated_{metric}_now": getattr(result, f"estimated_{metric}"),
                "estimation_error_same_rows": result.estimation_error}

    def _follow_evidence(self, current: Incident, outcome: CheckOutcome, verdict: Verdict) -> Incident:
        """An open incident's facts follow the newest evidence: a data-drift incident that now
        breaches on performance becomes a performance incident (and retrains); a later change
        point in the current champion's rows moves the start of the retraining data."""
        perf_firing = [r for r in verdict.firing if is_performance_reason(r)]
        if verdict.fire and perf_firing and current.reason == "drift":
            current = self.incidents.update(current.id, "reason_changed",
                                            f"now a {perf_firing[0]} incident: {verdict.message}",
                                            reason=perf_firing[0], retrain=True,
                                            change_ts=outcome.change_ts)
        elif verdict.fire and verdict.retrain and not current.retrain:
            self.incidents.note(current.id, "escalated", f"now retrain-worthy: {verdict.message}")
            self.incidents.set_retrain(current.id)
            current = self.incidents.get(current.id)
        if (perf_firing and outcome.change_ts is not None and current.state != "retraining"
                and (current.change_ts is None or outcome.change_ts > current.change_ts)):
            c = outcome.change
            current = self.incidents.update(
                current.id, "change_point",
                f"performance changed at {iso(outcome.change_ts)} ({c.describe()} on champion "
                f"v{outcome.champion_version}'s rows); retraining data starts there",
                change_ts=outcome.change_ts)
        return current

    def _keep_reports(self, incident: Incident) -> Incident:
        """Copy the Evidently reports an incident cites into its own folder, so report retention
        never removes the evidence of an open incident (its retrain attaches them to the run)."""
        if not incident.report_paths:
            return incident
        folder = self.cfg.home / "incidents" / incident.id
        kept = []
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for path in incident.report_paths:
                src = Path(path)
                if src.is_file():
                    dst = folder / src.name
                    shutil.copy2(src, dst)
                    kept.append(str(dst))
        except OSError as exc:
            log.warning("could not keep the reports of incident %s: %s", incident.id, exc)
            return incident
        self.incidents.set_fields(incident.id, report_paths=kept)
        return self.incidents.get(incident.id)

    def _drift_without_impact(self, incident: Incident, verdict: Verdict) -> str | None:
        """A data-drift incident (no retrain asked) whose model keeps performing: drift goes on, but
        the labelled performance stays within thresholds for ``alerts.drift_impact_windows`` judged
        checks in a row. It is resolved as drift without performance impact (its reports stay with
        it), instead of sitting open for as long as the new normal lasts. None: not that case."""
        if incident.reason != "drift" or incident.retrain or verdict.healthy_for("drift"):
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
            return (f"incident {incident.id}: drift goes on, performance within thresholds "
                    f"{self._impactless_streak}/{need} judged window(s)")
        self._resolve(incident, f"drift without performance impact: performance within thresholds on "
                                f"{self._impactless_streak} judged window(s) in a row ({verdict.message})")
        return f"resolved incident {incident.id} (drift without performance impact)"

    @staticmethod
    def _healthy_for(incident: Incident, verdict: Verdict) -> bool | None:
        if incident.reason == "drift" and not incident.retrain:
            return verdict.healthy_for("drift")
        return verdict.healthy_for("performance")

    def _resolve(self, incident: Incident, message: str) -> None:
        try:
            self.incidents.transition(incident.id, "resolved", message)
            log.info("incident %s resolved: %s", incident.id, message)
        except TransitionError as exc:
            log.info("%s", exc)
        self._healthy_streak = 0
        self._impactless_streak = 0

    # -- retrains -------------------------------------------------------------------------
    def maybe_retrain(self, incident: Incident, trigger: str, respect_cooldown: bool = True,
                      ignore_attempt_limit: bool = False) -> Started:
        """Start a retrain for ``incident`` when it may (single-flight; new evidence since the last
        try; enough labelled rows after the change point), or say in one line why not (also recorded
        on the incident). ``respect_cooldown=False`` (a person, the schedule) skips the evidence
        rules but not single-flight. ``ignore_attempt_limit`` is kept for callers; escalation
        never stops retraining."""
        with self.lock:
            forced = not respect_cooldown
            why_not = self._blocked(incident, forced)
            if why_not and not forced and incident.state in OUTCOME_STATES and not self._retrain_running(incident):
                # A breach after a promotion, rejection or failure that must wait for new evidence
                # (alerts.retry_rows, with labels arriving late that can take many checks) or the
                # cooldown: the incident says it waits, and for what, instead of sitting in its outcome.
                try:
                    self.incidents.transition(incident.id, "waiting", why_not, detail=why_not)
                except TransitionError as exc:
                    log.info("%s", exc)
                return Started(None, why_not)
            if why_not and not forced and incident.state == "waiting":
                self.incidents.note(incident.id, "waiting_progress", why_not, coalesce=True)
                self.incidents.set_fields(incident.id, detail=why_not)
                return Started(None, why_not)
            if why_not:
                # One row per wait since the last state change, updated with the newest count.
                self.incidents.note(incident.id, "retrain_deferred", why_not, coalesce=True)
                return Started(None, why_not)
            if not forced:  # the concept may have changed again since the incident's change point
                incident = rescan.follow(self.cfg, self.store, self.champion, self.incidents, self.attempts, incident)
            window, data_window, wait = self.training_window(incident, forced=forced)
            if wait and forced:  # a person or the schedule asked: say why not, do not park the incident
                self.incidents.note(incident.id, "retrain_deferred", wait, coalesce=True)
                return Started(None, wait)
            if wait:
                if incident.state != "waiting":
                    try:
                        incident = self.incidents.transition(incident.id, "waiting", wait, data=data_window,
                                                             detail=wait)
                    except TransitionError as exc:
                        log.info("%s", exc)
                else:
                    self.incidents.note(incident.id, "waiting_progress", wait, data_window, coalesce=True)
                    self.incidents.set_fields(incident.id, detail=wait)
                return Started(None, wait)
            self.incidents.transition(incident.id, "retraining", f"retrain ({trigger}) on {len(window)} rows",
                                      data=data_window)
            # The child needs no server token; keep it out of the files on disk.
            config = self.cfg.model_dump(mode="json", exclude={"server": {"token"}})

            def job_for(attempt: Attempt) -> RetrainJob:
                # Reports are kept in the incident's folder while it is open; skip any removed by hand.
                reports = [p for p in incident.report_paths if Path(p).is_file()]
                return RetrainJob(attempt.id, incident.id, trigger, window, config, report_paths=reports,
                                  data_window={**data_window, "attempt_id": attempt.id,
                                               "reason": incident.reason})
            try:
                attempt = self.supervisor.launch(job_for, incident.id, trigger, rows=len(window),
                                                 data_window=data_window)
            except BusyError as exc:  # another daemon on the same store got there first
                self.incidents.transition(incident.id, "failed", f"not started: {exc}")
                return Started(None, f"not retraining: {exc}")
            if attempt.status != "running":  # the child could not even start; already settled as failed
                return Started(None, f"retrain {attempt.id} failed to start: {attempt.error}")
            return Started(attempt, f"retrain {attempt.id} started")

    def _retrain_running(self, incident: Incident) -> bool:
        return self.supervisor.busy or self.attempts.running() is not None or incident.state == "retraining"

    def _blocked(self, incident: Incident, forced: bool = False) -> str | None:
        if self.supervisor.busy or self.attempts.running() is not None:
            return "waiting: a retrain is already running"
        if incident.state == "retraining":
            return "waiting: this incident is retraining"
        if forced:
            return None
        tries = self.attempts.for_incident(incident.id)
        if not tries:
            return None
        last = tries[-1]
        if last.status == "interrupted":  # its leader died under it: retried at once (retraining.failover)
            return None
        if last.status == "shadow":
            return (f"waiting: challenger v{last.challenger_version} passed the gate and is scoring live windows "
                    "in shadow (training.shadow.windows)")
        if last.status == "failed":
            left = cooldown_remaining(self.clock(), last.finished_at, self.cfg.alerts.cooldown_seconds)
            if left > 0:
                return (f"waiting: retry after the failed retrain at {iso(self.clock() + left)} "
                        "(alerts.cooldown_seconds)")
            return None
        # Promoted or rejected: the next try needs new labelled rows, more after each rejection in a row.
        need = self.retry_rows_needed(tries)
        have, since = self._evidence_since(last)
        if have < need:
            what = ("for the new champion to be judged" if last.status == "promoted" else "after a rejected retrain")
            return (f"waiting for {need - have} more labelled rows {what} ({have}/{need} labelled rows newer than "
                    f"the last try's data, {since})")
        return None

    def _evidence_since(self, attempt: Attempt) -> tuple[int, str]:
        """Labelled rows that the last try did not see: predictions newer than its data's end (or,
        without a recorded end, labels received since it started)."""
        end = (attempt.data_window or {}).get("end")
        if end:
            ts = pd.Timestamp(end) + pd.Timedelta(microseconds=1)
            return self.store.labelled_count(since=ts), f"after {end}"
        return self.store.labelled_count(received_after=attempt.started_at), f"since {iso(attempt.started_at)}"

    def retry_rows_needed(self, tries: list[Attempt]) -> int:
        """New labelled rows before the next try: ``alerts.retry_rows`` (default ``drift.min_labels``),
        doubled for each rejected or failed try in a row (at most 8x)."""
        base = self.cfg.alerts.retry_rows or self.cfg.drift.min_labels
        return base * min(8, 2 ** max(0, unsuccessful_in_a_row(tries) - 1))

    def training_window(self, incident: Incident,
                        forced: bool = False) -> tuple[pd.DataFrame, dict[str, Any], str | None]:
        """The labelled rows to retrain on, and why to wait instead (or None).

        With a change point on the incident: every labelled row from after it (the newest
        ``training.max_rows``), so a retry sees strictly more of the new concept than the try before,
        and a wait while fewer than ``training.post_change_rows`` exist (enough for the gate's
        held-out rows to decide). Without one (gradual drift, data drift): the rows after the last
        healthy window when there are that many, else the most recent ``alerts.retrain_rows``
        (default ``drift.window_size``) labelled rows."""
        recent = self.cfg.alerts.retrain_rows or self.cfg.drift.window_size
        n = self.cfg.training.max_rows
        need = self.cfg.training.post_change_rows
        since = None
        if incident.change_ts is not None:
            # A located step: rows before it are the old concept. Wait for enough rows after it.
            # Stored times are whole microseconds; float seconds can miss one by a fraction of a microsecond.
            since = pd.Timestamp(incident.change_ts, unit="s", tz="UTC").round("us")
            window = self.store.window(last_n=n, since=since, labelled_only=True)
            if len(window) < need and not forced:
                need = post_change_need(self.cfg, window, self.levels.read())
            if len(window) < need and not forced:
                msg = (f"waiting for {need - len(window)} more labelled rows after the change at "
                       f"{iso(incident.change_ts)} ({len(window)}/{need}; training.min_post_change_rows)")
                return window, {"rows": int(len(window)), "since": since.isoformat()}, msg
            if len(window) < self.cfg.training.min_rows:  # forced, and too few after the change: take recent rows
                since = None
        elif incident.window_start is not None:
            # No step located (a gradual decline): rows after the last healthy window when there are
            # enough of them, else the most recent rows. Waiting would only let the decline go on.
            since = pd.Timestamp(incident.window_start, unit="s", tz="UTC").round("us")
            window = self.store.window(last_n=n, since=since, labelled_only=True)
            window = window[window["ts"] > since]
            if len(window) < need:
                since = None
        if since is None:
            window = self.store.window(last_n=recent, labelled_only=True)
        span = {"rows": int(len(window)),
                "start": window["ts"].iloc[0].isoformat() if len(window) else None,
                "end": window["ts"].iloc[-1].isoformat() if len(window) else None,
                "since_change": since.isoformat() if since is not None else None}
        if len(window) < self.cfg.training.min_rows:
            return window, span, (f"not retraining: {len(window)} labelled rows < training.min_rows="
                                  f"{self.cfg.training.min_rows}; waiting for more")
        return window.reset_index(drop=True), span, None

    def settle(self, attempt: Attempt, result: ChildResult) -> None:
        """Record how a retrain ended, on the attempt and on its incident (the supervisor's callback)."""
        with self.lock:
            fields: dict[str, Any]
            if result.ok:
                o = result.outcome
                assert o is not None  # an ok result carries the outcome
                status = o["outcome"]
                fields = dict(run_id=o.get("run_id"), challenger_version=o.get("challenger_version"),
                              champion_version=o.get("champion_version"), duration_seconds=o.get("duration_seconds"),
                              samples_per_second=o.get("samples_per_second"), reasons=list(o.get("reasons") or []))
                message = f"{status}: version {o.get('challenger_version')}" + (
                    f" ({'; '.join(fields['reasons'])})" if fields["reasons"] else "")
            else:
                found = promoted_version(self.probe, attempt.incident_id, attempt.started_at, log.warning)
                if found is not None:  # the child promoted, then died before reporting
                    status = "promoted"
                    fields = dict(run_id=found.run_id, challenger_version=found.version,
                                  champion_version=found.version,
                                  reasons=["recovered from the registry: " + (result.error or "")])
                elif result.interrupted:  # its daemon stopped under it: not a failure of training
                    return stopped_with_its_daemon(self, attempt, f"interrupted: {result.error}")
                else:
                    status = "failed"
                    fields = dict(error=result.error, reasons=[result.error or "unknown error"],
                                  duration_seconds=max(0.0, self.clock() - attempt.started_at))
                message = f"{status}: " + (fields["reasons"][0] if fields["reasons"] else "")
            try:
                self.attempts.finish(attempt.id, status, **fields)
            except ValueError:
                log.warning("retrain %s was already settled; ignoring a late result", attempt.id)
                return
            if status == "promoted":
                self.champion.invalidate(fields.get("challenger_version"))
                self.policy.reset()
                self._healthy_streak = 0
            try:
                incident = self.incidents.transition(
                    attempt.incident_id, status, message, run_id=fields.get("run_id"),
                    version=fields.get("challenger_version"), outcome_reasons=fields.get("reasons") or [])
            except TransitionError as exc:
                log.warning("%s", exc)
                return
            log.log(logging.WARNING if status == "failed" else logging.INFO, "incident %s: retrain %s %s",
                    incident.id, attempt.id, message)
            incident = self._maybe_escalate(incident)
            if incident.reason in ("manual", "schedule", "review") or self._alertmanager_resolved(incident):
                self._resolve(incident, f"{incident.reason} retrain finished: {status}")

    def _maybe_escalate(self, incident: Incident) -> Incident:
        """An incident unrecovered after ``alerts.max_attempts`` rejected/failed tries in a row is
        escalated (``driftloop_incident_escalated``, the DriftloopIncidentEscalated alert); it keeps
        retrying as new labelled rows arrive. A promotion clears the flag."""
        tries = self.attempts.for_incident(incident.id)
        misses = unsuccessful_in_a_row(tries)
        limit = self.cfg.alerts.max_attempts
        if misses >= limit and not incident.escalated:
            log.warning("incident %s escalated: %d retrains in a row did not recover the model", incident.id, misses)
            return self.incidents.update(incident.id, "escalated",
                                         f"{misses} retrains in a row did not recover the model (alerts.max_attempts="
                                         f"{limit}); it keeps retrying as new labelled rows arrive", escalated=True)
        if misses == 0 and incident.escalated:
            return self.incidents.update(incident.id, "deescalated", "a retrain was promoted", escalated=False)
        return incident

    def _alertmanager_resolved(self, incident: Incident) -> bool:
        if incident.reason != "alertmanager":
            return False
        kinds = [e["kind"] for e in self.incidents.events(incident.id) if e["kind"].startswith("alertmanager_")]
        return bool(kinds) and kinds[-1] == "alertmanager_resolved"
