"""The controller's ground floor: what it holds (stores, policy, supervisor, lock, streaks) and how it
moves an incident: through the lifecycle's table (:mod:`monitor.daemon.decisions.lifecycle`), doing
each move's effect. The controller is built in floors, one duty each: this, retrains
(:mod:`monitor.daemon.runtime.retrains`), their outcomes (:mod:`monitor.daemon.runtime.settlement`),
suspected incidents (:mod:`monitor.daemon.runtime.suspicion`) and checks
(:mod:`monitor.daemon.runtime.controller`).
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
from monitor.daemon.state.attempts import Attempt, AttemptStore
from monitor.daemon.state.checklog import CheckLog
from monitor.daemon.runtime.estimation_watch import EstimationWatch
from monitor.daemon.runtime.checks import CheckJob, CheckOutcome, WindowSource
from monitor.daemon.state.incidents import Incident, IncidentStore, TransitionError
from monitor.daemon.retraining.launcher import ChildResult, Launcher
from monitor.daemon.state.levels import Level, ReferenceLevels
from monitor.daemon.decisions.lifecycle import Effect, Event
from monitor.daemon.decisions.actions import Action
from monitor.daemon.decisions.policy import AlertPolicy, Verdict
from monitor.daemon.retraining.registry import RegistryProbe
from monitor.daemon.retraining.supervisor import RetrainSupervisor
from monitor.daemon.retraining.slots import RetrainSlots

if TYPE_CHECKING:  # trainer (torch) is loaded only when a shadow is configured
    from monitor.drift.result import CheckResult
    from trainer.shadow import ShadowNews

log = logging.getLogger(__name__)


@dataclass
class CheckReport:
    outcome: CheckOutcome
    verdict: Verdict | None
    incident: Incident | None   # the open incident after this check, if any
    action: Action              # what the controller did (``str(action)``: one line for people)


class ControllerStore(WindowSource, Protocol):
    """What the controller reads from the store (:class:`monitor.store.PredictionStore`)."""

    engine: Engine  # the daemon's own tables (incidents, attempts, levels) live beside the records

    def labelled_count(self, since: Any = None, received_after: float | None = None) -> int: ...

    def last_label_time(self) -> datetime | None: ...  # read by the daemon's metrics


class Invalidatable(Protocol):
    """The champion cache (:class:`monitor.daemon.retraining.champion.ChampionCache`): dropped after a promotion."""

    def invalidate(self, version: str | None = None) -> None: ...

    def get(self) -> Any: ...  # the champion (trainer Champion), to re-score rows (monitor.daemon.runtime.rescan)


class IncidentMoves:
    def __init__(self, cfg: DriftloopConfig, store: ControllerStore, check_job: CheckJob, checklog: CheckLog,
                 incidents: IncidentStore, attempts: AttemptStore, policy: AlertPolicy, launcher: Launcher,
                 champion: Invalidatable, probe: RegistryProbe, clock: Callable[[], float],
                 shadow: Callable[[pd.DataFrame], ShadowNews | None] | None = None,
                 estimation: EstimationWatch | None = None):
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
        # The deployment's retrain queue when it hosts several models (monitor.daemon.retraining.slots).
        self.slots: RetrainSlots | None = None
        self._claimed_slot = False
        self.last_check: CheckReport | None = None
        self.last_result: CheckResult | None = None  # the latest successful check's
        self.unrecorded_errors = 0    # checks that failed so badly not even their row could be written
        self._healthy_streak = 0
        self._impactless_streak = 0  # judged windows in a row a drift incident's model performed well
        self._last_healthy_end: float | None = None
        self.last_versions: dict[str, Any] = {}
        self.levels = ReferenceLevels(store.engine, cfg.model.name)
        self._reference = Level()  # the level of the check being acted on


    def settle(self, attempt: Attempt, result: ChildResult) -> None:
        """The supervisor's callback when a retrain ends (:mod:`monitor.daemon.runtime.settlement`)."""
        raise NotImplementedError

    # -- moving an incident: the lifecycle's table and its effects ------------------------------
    def move(self, incident_id: str, event: Event, message: str, **fields: Any) -> Incident:
        """Send ``event`` to the incident (:data:`monitor.daemon.decisions.lifecycle.TABLE`) and do
        the move's effect. Raises :class:`TransitionError` for a move the table does not have."""
        with self.lock:
            incident, effect = self.incidents.apply(incident_id, event, message, **fields)
            self._effect(effect, incident.version)
            return incident

    def _effect(self, effect: Effect, version: str | None = None) -> None:
        if effect is Effect.RELOAD_CHAMPION:  # a promotion: the new champion is judged afresh
            self.champion.invalidate(version)
            self.policy.reset()
            self._healthy_streak = 0
        elif effect in (Effect.CLOSE, Effect.REOPEN):
            self._healthy_streak = 0
            self._impactless_streak = 0

    def resolve(self, incident: Incident, message: str) -> None:
        """Resolve ``incident`` (healthy again, cleared, a request done); a no-op with a log line
        when it moved meanwhile or is retraining."""
        try:
            self.move(incident.id, Event.RESOLVE, message)
            log.info("incident %s resolved: %s", incident.id, message)
        except TransitionError as exc:
            log.info("%s", exc)
        self._effect(Effect.CLOSE)


    def _note_drifted_rows(self, incident_id: str, outcome: CheckOutcome) -> None:
        """Note the rows behind the check's embedding drift on the incident it opened
        (:mod:`monitor.drift.drifted_rows`): each feature's clusters, by row ids; their input_uris
        stay in the check's record, which ``driftloop export-samples --check ID`` writes out."""
        found = getattr(outcome.result, "drifted_rows", None) or []
        if not found:
            return
        summary = [{k: v for k, v in d.to_dict().items() if k != "rows"} for d in found]
        self.incidents.note(incident_id, "drifted_rows",
                            "; ".join(d.describe() for d in found)
                            + f" (driftloop export-samples --check {outcome.id} writes them out)",
                            data={"check_id": outcome.id, "features": summary})

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
