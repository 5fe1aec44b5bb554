"""Retrains asked for from outside the check: Alertmanager's webhook, a person, the cron schedule.

Each attaches to the open incident when there is one (one incident at a time keeps the story
of a degradation in one place) and opens one otherwise. What it did is a
:class:`~monitor.daemon.decisions.actions.TriggerAction` (a kind and its data); the API answers with
its sentence.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from monitor.daemon.decisions.actions import TriggerAction, TriggerKind
from monitor.daemon.decisions.kinds import Reason, State
from monitor.daemon.runtime.alertmanager import WebhookPayload, select_alerts, summarize
from monitor.daemon.state.attempts import BusyError
from monitor.daemon.runtime.controller import Controller
from monitor.daemon.runtime.retrains import Started
from monitor.daemon.state.deliveries import DeliveryLedger
from monitor.daemon.state import AlertInbox
from monitor.daemon.state.incidents import Incident

log = logging.getLogger(__name__)


@dataclass
class TriggerResult:
    incident: Incident | None
    action: TriggerAction
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The API's answer: ``action`` for people, ``kind`` and ``retrain`` (what became of the
        retrain asked for, None when none was) for programs."""
        act = self.action
        return {"incident": self.incident.to_dict() if self.incident else None, "action": act.describe(),
                "kind": act.kind.value, "retrain": act.retrain.value if act.retrain else None, **self.details}


def _action(kind: TriggerKind, incident: Incident | None, started: Started | None = None) -> TriggerAction:
    if started is None:
        return TriggerAction(kind, incident.id if incident else None)
    return TriggerAction(kind, incident.id if incident else None, started.kind,
                         started.attempt.id if started.attempt else None, started.message)


def _wants_retrain(labels: dict[str, str], retrain_on_drift: bool) -> bool:
    return labels.get("reason") != Reason.DRIFT or retrain_on_drift


def handle_alertmanager(ctl: Controller, payload: WebhookPayload) -> TriggerResult:
    """Firing alerts that concern us open (or attach to) an incident and may retrain, with the
    cooldown; resolved ones are noted, and resolve an Alertmanager incident that is not retraining
    once no other alert for the model fires (delivered since it opened, not resolved).

    Deliveries are deduplicated by fingerprint and ``startsAt`` (deliveries.py): a firing alert
    delivered again attaches (one event row, counted), and one replayed after its resolution is
    recorded but not acted upon."""
    sel = select_alerts(payload, ctl.cfg.alerts.webhook_match, ctl.cfg.model.name)
    with ctl.lock:
        ledger = DeliveryLedger(ctl.store.engine, ctl.cfg.model.name, ctl.clock)
        seen = ledger.sort(sel.firing, sel.resolved)
        details = {"firing": len(seen.firing), "resolved": len(sel.resolved), "ignored": len(sel.ignored),
                   "replayed": len(seen.replay), "repeated": len(seen.repeat)}
        current = ctl.incidents.current()
        if seen.firing:
            summary = summarize(seen.firing)
            retrain = any(_wants_retrain(a.labels, ctl.cfg.alerts.retrain_on_drift) for a in seen.firing)
            data = {"alerts": [{"labels": a.labels, "startsAt": str(a.starts_at)} for a in seen.firing[:20]]}
            if current is None:
                current = ctl.incidents.open(Reason.ALERTMANAGER, "alert", f"Alertmanager: {summary}", retrain=retrain)
                ctl.incidents.note(current.id, "alertmanager_firing", summary, data, coalesce=True)
                kind = TriggerKind.OPENED
            else:
                ctl.incidents.note(current.id, "alertmanager_firing", summary, data, coalesce=True)
                if retrain and not current.retrain:
                    ctl.incidents.set_retrain(current.id)
                current = ctl.incidents.get(current.id)
                kind = TriggerKind.ATTACHED
            action = _action(kind, current, ctl.maybe_retrain(current, "alert") if current.retrain else None)
            log.warning("Alertmanager: %s (%s)", summary, action)
            return TriggerResult(ctl.incidents.get(current.id), action, details)
        if seen.replay:
            summary = summarize(seen.replay)
            log.warning("Alertmanager: replay of resolved alert(s) ignored: %s", summary)
            if current is not None:
                ctl.incidents.note(current.id, "alertmanager_replay", summary, coalesce=True)
        if sel.resolved and current is not None:
            summary = summarize(sel.resolved)
            ctl.incidents.note(current.id, "alertmanager_resolved", summary, coalesce=True)
            still = ledger.firing_since(current.opened_at)
            if still:  # Alertmanager groups by alertname: one alert's resolution is not the others'
                ctl.incidents.note(current.id, "alertmanager_still_firing",
                                   f"{still} other alert(s) for this model still firing", coalesce=True)
            elif current.reason == Reason.ALERTMANAGER and current.state != State.RETRAINING:
                ctl.resolve(current, f"Alertmanager resolved: {summary}")
                return TriggerResult(ctl.incidents.get(current.id), _action(TriggerKind.RESOLVED, current), details)
            return TriggerResult(current, _action(TriggerKind.NOTED, current), details)
        if seen.replay:
            return TriggerResult(current, _action(TriggerKind.REPLAY_IGNORED, current), details)
        return TriggerResult(current, _action(TriggerKind.NOTHING, current), details)


def hold_for_leader(ctl: Controller, payload: WebhookPayload) -> TriggerResult:
    """On a follower: the alerts concerning this model, held in the shared store for its leader
    (state/inbox.py), which acts on them as on its own delivery. Raises InboxFullError (503) when
    no leader has taken the model's deliveries for a long while."""
    sel = select_alerts(payload, ctl.cfg.alerts.webhook_match, ctl.cfg.model.name)
    details: dict[str, Any] = {"firing": len(sel.firing), "resolved": len(sel.resolved), "ignored": len(sel.ignored)}
    if not sel.firing and not sel.resolved:
        return TriggerResult(None, TriggerAction(TriggerKind.NOTHING), details)
    kept = payload.model_dump(mode="json", by_alias=True, exclude_none=True)
    kept["alerts"] = [a.model_dump(mode="json", by_alias=True, exclude_none=True) for a in sel.firing + sel.resolved]
    held = AlertInbox(ctl.store.engine, ctl.cfg.model.name, ctl.clock).put(kept)
    log.info("Alertmanager: %d alert(s) held for the leader of model %s (delivery %d): %s",
             len(kept["alerts"]), ctl.cfg.model.name, held, summarize(sel.firing + sel.resolved))
    return TriggerResult(None, TriggerAction(TriggerKind.QUEUED), {**details, "held": held})


def take_held(ctl: Controller, before_each: Callable[[], None]) -> int:
    """On the leader: act on the deliveries followers held for this model, oldest first; each is
    removed once acted upon (one that fails stays for the next time: the ledger knows a repeat).
    ``before_each`` raises to stop (MLflow unavailable, leadership lost). Returns how many were taken."""
    inbox = AlertInbox(ctl.store.engine, ctl.cfg.model.name, ctl.clock)
    taken = 0
    for delivery in inbox.pending():
        before_each()
        try:
            payload = WebhookPayload.model_validate(delivery.payload)
        except ValueError as exc:  # written by another version of driftloop: nothing to act on
            log.error("Alertmanager delivery %d held for this model cannot be read, dropped: %s", delivery.id, exc)
        else:
            result = handle_alertmanager(ctl, payload)
            log.info("Alertmanager delivery %d held by a follower: %s", delivery.id, result.action)
        inbox.done(delivery.id)
        taken += 1
    return taken


def request_retrain(ctl: Controller, trigger: str, detail: str) -> TriggerResult:
    """A manual (``POST /v1/retrain``) or scheduled retrain: no cooldown, but single-flight.
    Raises :class:`BusyError` when a retrain is running."""
    reason = Reason.MANUAL if trigger == "manual" else Reason.SCHEDULE
    with ctl.lock:
        if ctl.supervisor.busy or ctl.attempts.running() is not None:
            running = ctl.attempts.running()
            raise BusyError(f"a retrain is already running ({running.id if running else 'starting'})")
        current = ctl.incidents.current()
        if current is None:
            current = ctl.incidents.open(reason, trigger, detail)
            kind = TriggerKind.OPENED
        else:
            ctl.incidents.note(current.id, f"{reason}_retrain", detail)
            kind = TriggerKind.ATTACHED
        # A person asking explicitly overrides the attempt limit; the schedule does not.
        started = ctl.maybe_retrain(current, trigger, respect_cooldown=False, ignore_attempt_limit=trigger == "manual")
        incident = ctl.incidents.get(current.id)
        if started.attempt is None and incident.reason == reason and incident.state == State.FIRING:
            ctl.resolve(incident, f"{reason} retrain not started: {started}")
            incident = ctl.incidents.get(current.id)
        return TriggerResult(incident, _action(kind, current, started),
                             {"attempt_id": started.attempt.id if started.attempt else None})
