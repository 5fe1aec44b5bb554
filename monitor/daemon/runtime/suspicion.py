"""The early warning: suspected incidents. An estimated drop (from the scores alone) opens one;
labels confirm it (the lifecycle's ``confirm`` event) or clear it.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from monitor.daemon.runtime.checks import CheckOutcome
from monitor.daemon.state.incidents import Incident
from monitor.daemon.decisions.actions import Action, ActionKind
from monitor.daemon.decisions.breach import is_performance_reason
from monitor.daemon.decisions.kinds import State
from monitor.daemon.decisions.lifecycle import Event
from monitor.daemon.decisions.policy import Verdict
from monitor.daemon.runtime.settlement import Settlement
from monitor.tasks import task_of

if TYPE_CHECKING:
    from monitor.drift.result import CheckResult

log = logging.getLogger(__name__)


class Suspicion(Settlement):
    def _open_suspected(self, outcome: CheckOutcome, verdict: Verdict) -> Action:
        """An estimated drop with its band clear of the threshold, before labels can judge: alert
        (state ``suspected``), retrain only with ``alerts.retrain_on_estimate``."""
        first = verdict.suspected[0]
        retrain = self.cfg.alerts.retrain_on_estimate
        incident = self.incidents.open(
            first.reason, "alert", verdict.message, check_id=outcome.id, report_paths=outcome.report_paths,
            window_start=self._last_healthy_end, retrain=retrain,
            reference=(self._reference.accuracy, self._reference.roc_auc),
            state=State.SUSPECTED, data={"estimated": {b.reason: b.value for b in verdict.suspected},
                                     "bound": {b.reason: b.bound for b in verdict.suspected}})
        incident = self._keep_reports(incident)
        log.warning("incident %s suspected (no labels yet): %s", incident.id, verdict.message)
        if not retrain:
            return Action(ActionKind.OPENED_SUSPECTED, incident.id, incident.state,
                          detail="waiting for labels to confirm; alerts.retrain_on_estimate is off")
        return self.maybe_retrain(incident, "alert").action(ActionKind.OPENED_SUSPECTED, incident)

    def _judge_suspected(self, current: Incident, outcome: CheckOutcome, verdict: Verdict) -> Action:
        """Labels decide a suspected incident: a sustained breach confirms it (it goes on as a
        firing incident), a healthy labelled check clears it; the realised-vs-estimated error goes
        on the event. Without labels, an estimate back within thresholds for ``healthy_windows``
        checks clears it too."""
        if verdict.performance_known:
            data = self._estimate_error(current, outcome.judged)
            perf_firing = [r for r in verdict.firing if is_performance_reason(r)]
            if verdict.fire and perf_firing:
                incident = self.move(current.id, Event.CONFIRM, f"confirmed by labels: {verdict.message}", data=data)
                incident = self.incidents.update(incident.id, "confirmed", f"now a {perf_firing[0]} incident",
                                                 reason=perf_firing[0], retrain=True, change_ts=outcome.change_ts)
                log.warning("incident %s confirmed by labels: %s", incident.id, verdict.message)
                return self.maybe_retrain(incident, "alert").action(ActionKind.CONFIRMED, incident)
            if verdict.healthy_for("performance"):
                self.move(current.id, Event.RESOLVE, f"cleared by labels: {verdict.message}", data=data)
                log.info("incident %s cleared by labels: %s", current.id, verdict.message)
                return Action(ActionKind.CLEARED, current.id, current.state)
            return Action(ActionKind.SUSPECT_LABELS_BREACH, current.id, current.state)
        if verdict.suspect:
            self._healthy_streak = 0
            self.incidents.note(current.id, "still_suspected", "estimated drop persists; waiting for labels",
                                dedupe=True)
            return Action(ActionKind.SUSPECT_PERSISTS, current.id, current.state)
        if verdict.healthy.get("estimate"):
            self._healthy_streak += 1
            need = self.cfg.alerts.healthy_windows
            if self._healthy_streak >= need:
                self.resolve(current, f"cleared: estimate within thresholds for {self._healthy_streak} window(s): "
                                      f"{verdict.message}")
                return Action(ActionKind.CLEARED, current.id, current.state)
            return Action(ActionKind.SUSPECT_ESTIMATE_HEALTHY, current.id, current.state,
                          progress=(self._healthy_streak, need))
        return Action(ActionKind.SUSPECT_WAITING, current.id, current.state)

    def _estimate_error(self, incident: Incident, result: CheckResult) -> dict[str, Any]:
        """How far the estimate was from what the labels say, for the incident's event trail
        (accuracy; a regression model's MAE)."""
        metric = task_of(getattr(result, "task", None) or "binary").primary_metric
        opened = next((e for e in self.incidents.events(incident.id) if e["kind"] == "opened"), None)
        at_opening = ((opened or {}).get("data") or {}).get("estimated", {}).get(metric)
        realised = getattr(result, metric)
        return {f"estimated_{metric}_at_opening": at_opening, f"realised_{metric}": realised,
                "error_vs_opening": None if at_opening is None or realised is None else realised - at_opening,
                f"estimated_{metric}_now": getattr(result, f"estimated_{metric}"),
                "estimation_error_same_rows": result.estimation_error}
