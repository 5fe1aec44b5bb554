"""How a retrain ends: the child's result (or the registry, when it died after promoting), and a shadow's
verdict on live windows. The attempt and its incident are written in one transaction; the move's
effect (:class:`monitor.daemon.decisions.lifecycle.Effect`) reloads the champion after a promotion.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, cast

from monitor.daemon.state.attempts import Attempt
from monitor.daemon.retraining.failover import stopped_with_its_daemon
from monitor.daemon.state.incidents import Incident, TransitionError
from monitor.daemon.retraining.launcher import ChildResult
from monitor.daemon.decisions.kinds import REQUESTED_REASONS, Outcome, Reason, State
from monitor.daemon.decisions.attainable import attainable_from, bar_of
from monitor.daemon.decisions.breach import baseline_bounds, is_performance_reason, lower_is_better, own_bar
from monitor.daemon.decisions.lifecycle import OUTCOME_EVENTS, step
from monitor.daemon.retraining.registry import promoted_version, tag_run
from monitor.errors import DriftloopError
from monitor.store.engine import write_transaction
from monitor.tasks import task_of
from monitor.daemon.runtime.retrains import Retrains
from monitor.daemon.state.attempts import unsuccessful_in_a_row

if TYPE_CHECKING:
    from monitor.daemon.runtime.controller import Controller

log = logging.getLogger(__name__)


class Settlement(Retrains):
    def settle(self, attempt: Attempt, result: ChildResult) -> None:
        """Record how a retrain ended, on the attempt and on its incident (the supervisor's callback)."""
        with self.lock:
            fields: dict[str, Any]
            if result.ok:
                o = result.outcome
                assert o is not None  # an ok result carries the outcome
                status = Outcome(o["outcome"])
                fields = dict(run_id=o.get("run_id"), challenger_version=o.get("challenger_version"),
                              champion_version=o.get("champion_version"), duration_seconds=o.get("duration_seconds"),
                              samples_per_second=o.get("samples_per_second"), reasons=list(o.get("reasons") or []))
                message = f"{status}: version {o.get('challenger_version')}" + (
                    f" ({'; '.join(fields['reasons'])})" if fields["reasons"] else "")
            else:
                found = promoted_version(self.probe, attempt.incident_id, attempt.started_at, log.warning)
                if found is not None:  # the child promoted, then died before reporting
                    status = Outcome.PROMOTED
                    fields = dict(run_id=found.run_id, challenger_version=found.version,
                                  champion_version=found.version,
                                  reasons=["recovered from the registry: " + (result.error or "")])
                elif result.interrupted:  # its daemon stopped under it: not a failure of training
                    return stopped_with_its_daemon(cast("Controller", self), attempt, f"interrupted: {result.error}")
                else:
                    status = Outcome.FAILED
                    fields = dict(error=result.error, reasons=[result.error or "unknown error"],
                                  duration_seconds=max(0.0, self.clock() - attempt.started_at))
                message = f"{status}: " + (fields["reasons"][0] if fields["reasons"] else "")
            moved = None
            try:
                with write_transaction(self.store.engine) as conn:  # the attempt and its incident: one write
                    self.attempts.finish(attempt.id, status, conn=conn, **fields)
                    try:
                        moved = self.incidents.apply(
                            attempt.incident_id, OUTCOME_EVENTS[status], message, conn=conn,
                            run_id=fields.get("run_id"), version=fields.get("challenger_version"),
                            outcome_reasons=fields.get("reasons") or [])
                    except TransitionError as exc:
                        log.warning("%s", exc)
            except ValueError:
                log.warning("retrain %s was already settled; ignoring a late result", attempt.id)
                return
            version = fields.get("challenger_version")
            self._effect(moved[1] if moved else step(State.RETRAINING, OUTCOME_EVENTS[status])[1], version)
            if moved is None:
                return
            incident = moved[0]
            log.log(logging.WARNING if status == Outcome.FAILED else logging.INFO, "incident %s: retrain %s %s",
                    incident.id, attempt.id, message)
            incident = self._maybe_escalate(incident)
            if incident.reason in REQUESTED_REASONS or self._alertmanager_resolved(incident):
                self.resolve(incident, f"{incident.reason} retrain finished: {status}")
            elif status in (Outcome.PROMOTED, Outcome.REJECTED) and result.ok and result.outcome:
                self._maybe_attainable(incident, attempt, result.outcome)

    def _maybe_attainable(self, incident: Incident, attempt: Attempt, outcome: dict[str, Any]) -> None:
        """Measure the attainable level after a retrain on post-change rows; after
        ``alerts.attainable_after`` in a row short of the bar, decide it (module
        :mod:`monitor.daemon.decisions.attainable`). Never raises: a failure here leaves the
        incident as it was."""
        try:
            self._attainable(incident, attempt, outcome)
        except Exception:
            log.exception("incident %s: measuring the attainable level failed", incident.id)

    def _attainable(self, incident: Incident, attempt: Attempt, outcome: dict[str, Any]) -> None:
        after = self.cfg.alerts.attainable_after
        since_change = (attempt.data_window or {}).get("since_change")
        if not after or not is_performance_reason(str(incident.reason)) or not since_change:
            return
        figure = task_of(self.cfg.model).primary_metric
        found = attainable_from(outcome.get("metrics") or {}, figure)
        if found is None:
            return
        stored = self.levels.read() or {}
        champion = self.champion.get()
        level = stored.get(f"reference_{figure}")
        baseline = own_bar(figure, champion.baseline.metrics.get(figure), level,
                           baseline_bounds(getattr(champion.baseline, "intervals", None)))
        bar = bar_of(figure, level, baseline)
        if bar is None:
            return
        threshold = self.cfg.alerts.mae_rise if lower_is_better(figure) else self.cfg.alerts.accuracy_drop
        short = found.short_of(bar, threshold, self.cfg.alerts.mode)
        previous = [e for e in self.incidents.events(incident.id) if e["kind"] == "attainable_estimate"]
        last = (previous[-1].get("data") or {}) if previous else {}
        in_a_row = int(last.get("short_in_a_row", 0)) + 1 if short else 0
        self.incidents.note(incident.id, "attainable_estimate",
                            f"best attainable {found.describe()}; bar {bar:.4f}: "
                            + ("short of it" if short else "within reach"),
                            {**found.to_dict(), "bar": bar, "short_in_a_row": in_a_row, "attempt": attempt.id})
        if in_a_row < after:
            return
        version = str(outcome.get("champion_version") or champion.version)
        message = (f"the concept changed; the best attainable {found.describe()} (bar was {bar:.4f}; "
                   f"{in_a_row} retrains in a row on every labelled row since the change fell short of it): "
                   f"later checks are judged against {found.value:.4f}")
        values = {figure: found.value, "roc_auc": found.roc_auc}
        self.levels.write(version, values.get("accuracy"), values.get("roc_auc"), values.get("mae"), attainable=True)
        self.incidents.note(incident.id, "attainable_level", message,
                            {**found.to_dict(), "bar": bar, "version": version, "attempt": attempt.id})
        log.warning("incident %s: %s", incident.id, message)
        tag_run(self.cfg, outcome.get("run_id"), "driftloop.attainable_level", message)
        self.resolve(self.incidents.get(incident.id), f"attainable level recorded: {found.describe()}")

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
        if incident.reason != Reason.ALERTMANAGER:
            return False
        kinds = [e["kind"] for e in self.incidents.events(incident.id) if e["kind"].startswith("alertmanager_")]
        return bool(kinds) and kinds[-1] == "alertmanager_resolved"

    def _observe_shadow(self) -> None:
        try:
            news = self.shadow(self.check_job.current_window()) if self.shadow else None
        except DriftloopError as exc:  # the registry or the store is down: the next check tries again
            log.warning("shadow challenger not observed: %s", exc)
            return
        if news is None:
            held = self.attempts.in_shadow()
            if held is not None and held.challenger_version:  # its shadow ended outside the daemon
                self._end_shadow(held.challenger_version, Outcome.REJECTED, "the shadow is no longer pending")
            return
        self.last_shadow = news.message
        log.info("%s", news.message)
        if news.ended:
            self._end_shadow(news.version, Outcome.PROMOTED if news.kind == "promoted" else Outcome.REJECTED,
                             news.message)

    def _end_shadow(self, version: str, status: Outcome, message: str) -> None:
        """A shadow's verdict settles the attempt that held it and moves its incident, as any
        promotion or rejection does: a promoted shadow is a promotion by the loop (the reference
        level stays, see monitor.daemon.state.levels) and resets the alert streaks."""
        with self.lock:
            moved = None
            with write_transaction(self.store.engine) as conn:  # the attempt and its incident: one write
                attempt = self.attempts.end_shadow(version, status, message, conn)
                if attempt is not None:
                    try:
                        moved = self.incidents.apply(attempt.incident_id, OUTCOME_EVENTS[status], message, conn=conn,
                                                     version=version, outcome_reasons=attempt.reasons)
                    except TransitionError as exc:  # resolved meanwhile, or moved on to another attempt
                        log.info("%s", exc)
            # A promotion reloads the champion also when no incident moved (a retrain run outside the daemon).
            self._effect(moved[1] if moved else step(State.SHADOW, OUTCOME_EVENTS[status])[1], version)
