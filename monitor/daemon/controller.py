"""The controller: turns checks and external triggers into incidents and retrains.

It owns the decisions; everything with a side effect is injected (check job, stores, policy,
retrain launcher, champion cache, registry probe, clock). One re-entrant lock serialises
decisions, so a check, an Alertmanager webhook and a finishing retrain never race on an incident.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from monitor.config import DriftloopConfig
from monitor.daemon.attempts import Attempt, AttemptStore, BusyError
from monitor.daemon.checklog import CheckLog
from monitor.daemon.checks import CheckJob, CheckOutcome
from monitor.daemon.incidents import Incident, IncidentStore, TransitionError
from monitor.daemon.launcher import ChildResult, Launcher, RetrainJob
from monitor.daemon.policy import AlertPolicy, Observation, Verdict, cooldown_remaining
from monitor.daemon.registry import RegistryProbe, promoted_version
from monitor.daemon.status import iso
from monitor.daemon.supervisor import RetrainSupervisor

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


def observation(outcome: CheckOutcome) -> Observation:
    r = outcome.result
    return Observation(labelled_rows=outcome.labelled_rows, accuracy=r.accuracy, roc_auc=r.roc_auc,
                       baseline_accuracy=r.baseline_accuracy, baseline_roc_auc=r.baseline_roc_auc,
                       dataset_drift=bool(r.dataset_drift), champion_version=outcome.champion_version,
                       window_rows=outcome.window_rows)


class Controller:
    def __init__(self, cfg: DriftloopConfig, store: Any, check_job: CheckJob, checklog: CheckLog,
                 incidents: IncidentStore, attempts: AttemptStore, policy: AlertPolicy, launcher: Launcher,
                 champion: Any, probe: RegistryProbe, clock: Callable[[], float]):
        self.cfg = cfg
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
        self._last_healthy_end: float | None = None

    # -- checks ---------------------------------------------------------------------------
    def run_check(self) -> CheckReport:
        outcome = self.check_job.run()
        with self.lock:
            outcome.id = self.checklog.record(outcome)
            if outcome.status != "ok":
                # Said once at INFO when it starts; a repeat every interval would drown the log.
                repeated = self.last_check is not None and self.last_check.outcome.status == outcome.status
                level = logging.ERROR if outcome.status == "error" else logging.DEBUG if repeated else logging.INFO
                log.log(level, "check %s: %s", outcome.status, outcome.message)
                report = CheckReport(outcome, None, self.incidents.current(), outcome.message)
            else:
                self.last_result = outcome.result
                verdict = self.policy.observe(observation(outcome))
                self.checklog.set_verdict(outcome.id, verdict.message)
                action = self._act(outcome, verdict)
                log.info("check: %d rows, %d labelled; %s; %s", outcome.window_rows, outcome.labelled_rows,
                         verdict.message, action)
                report = CheckReport(outcome, verdict, self.incidents.current(), action)
            self.last_check = report
            return report

    def _act(self, outcome: CheckOutcome, verdict: Verdict) -> str:
        if verdict.performance_known and not any(b.reason != "drift" for b in verdict.breaches):
            self._last_healthy_end = outcome.window_end
        current = self.incidents.current()
        if current is None:
            self._healthy_streak = 0
            if not verdict.fire:
                return "no incident"
            incident = self.incidents.open(
                verdict.reason, "alert", verdict.message, check_id=outcome.id, report_paths=outcome.report_paths,
                window_start=self._last_healthy_end, retrain=verdict.retrain)
            log.warning("incident %s opened: %s", incident.id, verdict.message)
            if not verdict.retrain:
                return f"opened incident {incident.id} (no retrain: alerts.retrain_on_drift is off)"
            return f"opened incident {incident.id}; {self.maybe_retrain(incident, 'alert')}"
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
        if verdict.fire:
            if verdict.retrain and not current.retrain:
                self.incidents.note(current.id, "escalated", f"now retrain-worthy: {verdict.message}")
                self.incidents.set_retrain(current.id)
                current = self.incidents.get(current.id)
            if current.retrain:
                return f"incident {current.id} still breaching; {self.maybe_retrain(current, 'alert')}"
        return f"incident {current.id} ({current.state}) open; {'unknown health' if healthy is None else 'unhealthy'}"

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

    # -- retrains -------------------------------------------------------------------------
    def maybe_retrain(self, incident: Incident, trigger: str, respect_cooldown: bool = True,
                      ignore_attempt_limit: bool = False) -> Started:
        """Start a retrain for ``incident`` if single-flight, cooldown and attempt limits allow.
        Says what happened in one line (also recorded on the incident when it did not start)."""
        with self.lock:
            why_not = self._blocked(incident, respect_cooldown, ignore_attempt_limit)
            if why_not:
                self.incidents.note(incident.id, "retrain_deferred", why_not, dedupe=True)
                return Started(None, why_not)
            window, data_window = self.training_window(incident)
            need = self.cfg.training.min_rows
            if len(window) < need:
                msg = f"not retraining: {len(window)} labelled rows < training.min_rows={need}"
                self.incidents.note(incident.id, "retrain_deferred", msg, dedupe=True)
                return Started(None, msg)
            self.incidents.transition(incident.id, "retraining", f"retrain ({trigger}) on {len(window)} rows",
                                      data=data_window)
            # The child needs no server token; keep it out of the files on disk.
            config = self.cfg.model_dump(mode="json", exclude={"server": {"token"}})

            def job_for(attempt: Attempt) -> RetrainJob:
                # Reports removed by retention since the check are left out rather than failing the retrain.
                reports = [p for p in incident.report_paths if Path(p).is_file()]
                return RetrainJob(attempt.id, incident.id, trigger, window, config, report_paths=reports,
                                  data_window={**data_window, "attempt_id": attempt.id})
            try:
                attempt = self.supervisor.launch(job_for, incident.id, trigger, rows=len(window), data_window=data_window)
            except BusyError as exc:  # another daemon on the same store got there first
                self.incidents.transition(incident.id, "failed", f"not started: {exc}")
                return Started(None, f"not retraining: {exc}")
            if attempt.status != "running":  # the child could not even start; already settled as failed
                return Started(None, f"retrain {attempt.id} failed to start: {attempt.error}")
            return Started(attempt, f"retrain {attempt.id} started")

    def _blocked(self, incident: Incident, respect_cooldown: bool, ignore_attempt_limit: bool) -> str | None:
        if self.supervisor.busy or self.attempts.running() is not None:
            return "waiting: a retrain is already running"
        if incident.state == "retraining":
            return "waiting: this incident is retraining"
        if incident.attempts >= self.cfg.alerts.max_attempts and not ignore_attempt_limit:
            return f"not retraining: {incident.attempts} attempts made (alerts.max_attempts)"
        if respect_cooldown:
            last = self.attempts.last_finished()
            left = cooldown_remaining(self.clock(), last.finished_at if last else None, self.cfg.alerts.cooldown_seconds)
            if left > 0:
                return f"waiting: cooldown until {iso(self.clock() + left)} (alerts.cooldown_seconds)"
        return None

    def training_window(self, incident: Incident) -> tuple[pd.DataFrame, dict[str, Any]]:
        """The labelled rows to retrain on: the most recent ``alerts.retrain_rows`` (default
        ``drift.window_size``) labelled rows, taken from after the last window the champion was
        healthy on when enough of them exist, so rows from after the drift dominate."""
        n = self.cfg.alerts.retrain_rows or self.cfg.drift.window_size
        need = max(self.cfg.training.min_rows, self.cfg.drift.min_labels)
        window = None
        if incident.window_start is not None:
            since = pd.Timestamp(incident.window_start, unit="s", tz="UTC")
            window = self.store.window(last_n=n, since=since, labelled_only=True)
            window = window[window["ts"] > since]
            if len(window) < need:
                window = None
        if window is None:
            window = self.store.window(last_n=n, labelled_only=True)
        span = {"rows": int(len(window)),
                "start": window["ts"].iloc[0].isoformat() if len(window) else None,
                "end": window["ts"].iloc[-1].isoformat() if len(window) else None}
        return window.reset_index(drop=True), span

    def settle(self, attempt: Attempt, result: ChildResult) -> None:
        """Record how a retrain ended, on the attempt and on its incident (the supervisor's callback)."""
        with self.lock:
            if result.ok:
                o = result.outcome
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
                                  champion_version=found.version, reasons=["recovered from the registry: " + (result.error or "")])
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
                self.champion.invalidate()
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
            if incident.reason in ("manual", "schedule") or self._alertmanager_resolved(incident):
                self._resolve(incident, f"{incident.reason} retrain finished: {status}")

    def _alertmanager_resolved(self, incident: Incident) -> bool:
        if incident.reason != "alertmanager":
            return False
        kinds = [e["kind"] for e in self.incidents.events(incident.id) if e["kind"].startswith("alertmanager_")]
        return bool(kinds) and kinds[-1] == "alertmanager_resolved"
