"""Finishing the retrain a dead leader left behind.

A leader killed mid-retrain (SIGKILL, a lost host) takes its retrain child with it (the child's
watchdog ends it within half a second), leaving an attempt ``running`` in the store and, perhaps,
a registered version in MLflow with no outcome. The daemon that leads next (a follower taking
over, or the same one restarted) settles it here, from what the child left behind:

1. ``result.json`` in the job folder (the home is shared): the child finished; its result stands.
2. a version of this attempt that the ``champion`` alias points at: it promoted, then died.
3. a version carrying ``driftloop.outcome``: the child got past the gate and recorded its
   verdict (rejected, or held in shadow), then died; the verdict stands.
4. otherwise the attempt was **interrupted**: not a failure of training, so it counts toward
   neither ``alerts.cooldown_seconds`` nor the back-off and escalation after failed or rejected
   tries, and it is retried at once. A version it registered before the gate is an orphan.

Every version the new leader looked at gets a ``driftloop.fate`` tag (:data:`FATE_TAG`) saying
which of these it was, so no registry version is left without an outcome or a fate.
The versions of an attempt are found through their runs: the daemon puts the attempt id into the
data window the trainer records as the run's ``driftloop.data_window`` tag.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monitor.daemon.decisions.kinds import Outcome, State
from monitor.daemon.state.attempts import OUTCOMES, Attempt
from monitor.daemon.state.incidents import TransitionError
from monitor.daemon.retraining.launcher import ChildResult, read_result
from monitor.daemon.retraining.registry import INCIDENT_TAG, promoted_version
from monitor.errors import DriftloopError

if TYPE_CHECKING:
    from monitor.daemon.runtime.controller import Controller

log = logging.getLogger(__name__)

FATE_TAG = "driftloop.fate"
ORPHANED = "orphaned: leader died before the gate"
ORPHANED_BY_STOP = "orphaned: its daemon stopped before the gate"
COMPLETED = "completed by the new leader"
DATA_WINDOW_TAG = "driftloop.data_window"  # trainer.runs.lineage_tags


@dataclass(frozen=True)
class AttemptVersion:
    version: str
    run_id: str
    is_champion: bool
    tags: dict[str, str]

    @property
    def outcome(self) -> str | None:
        """The verdict the child recorded on the version (``driftloop.outcome``), if it got that far."""
        return self.tags.get("driftloop.outcome") or None


def _of_attempt(run: Any, attempt: Attempt) -> bool:
    """Is ``run`` this attempt's? By the attempt id in its data window; a run without one (an older
    daemon's) by its start time, as :class:`monitor.daemon.retraining.registry.MlflowProbe` does."""
    try:
        window = json.loads(run.data.tags.get(DATA_WINDOW_TAG) or "{}")
    except ValueError:
        window = {}
    if isinstance(window, dict) and window.get("attempt_id"):
        return window["attempt_id"] == attempt.id
    return bool(run.info.start_time >= (attempt.started_at - 5) * 1000)


def attempt_versions(cfg: Any, attempt: Attempt) -> list[AttemptVersion]:
    """The registry versions this attempt's child registered, oldest first. RegistryError when
    MLflow cannot be asked."""
    from trainer import registry as reg

    reg.check_reachable(cfg)
    with reg.session(cfg), reg.translating(cfg, f"looking up retrain {attempt.id}"):
        registry = reg.Registry(cfg)
        experiment = registry.client.get_experiment_by_name(cfg.experiment_name)
        if experiment is None:
            return []
        runs = registry.client.search_runs([experiment.experiment_id],
                                           filter_string=f"tags.`{INCIDENT_TAG}` = '{attempt.incident_id}'",
                                           max_results=100)
        run_ids = {r.info.run_id for r in runs if _of_attempt(r, attempt)}
        if not run_ids:
            return []
        champion = registry.alias_version(reg.CHAMPION)
        found = [v for v in registry.client.search_model_versions(f"name = '{registry.name}'") if v.run_id in run_ids]
    return sorted((AttemptVersion(str(v.version), str(v.run_id), str(v.version) == str(champion), dict(v.tags or {}))
                   for v in found), key=lambda v: int(v.version))


def end_runs(cfg: Any, attempt: Attempt) -> None:
    """Mark the MLflow runs an interrupted attempt's child left ``RUNNING`` as ``KILLED`` (the child
    died or was stopped before it could end them; the MLflow UI showed them running for good).
    Best effort: a failure is logged, not raised."""
    from trainer import registry as reg
    try:
        with reg.session(cfg), reg.translating(cfg, f"ending the runs of retrain {attempt.id}"):
            registry = reg.Registry(cfg)
            experiment = registry.client.get_experiment_by_name(cfg.experiment_name)
            if experiment is None:
                return
            runs = registry.client.search_runs(
                [experiment.experiment_id], max_results=100,
                filter_string=f"tags.`{INCIDENT_TAG}` = '{attempt.incident_id}' and attributes.status = 'RUNNING'")
            for run in runs:
                if _of_attempt(run, attempt):
                    registry.client.set_terminated(run.info.run_id, status="KILLED")
    except DriftloopError as exc:
        log.warning("could not end the MLflow runs of the interrupted retrain %s: %s", attempt.id, exc)


def tag_fate(cfg: Any, versions: list[AttemptVersion], fate: str) -> None:
    """``driftloop.fate`` on each version (best effort: a failure is logged, not raised)."""
    if not versions:
        return
    from trainer import registry as reg
    try:
        with reg.session(cfg), reg.translating(cfg, "tagging a retrain's versions with their fate"):
            registry = reg.Registry(cfg)
            for v in versions:
                registry.client.set_model_version_tag(registry.name, v.version, FATE_TAG, fate)
    except DriftloopError as exc:
        log.warning("could not tag version(s) %s with their fate (%s): %s",
                    ", ".join(v.version for v in versions), fate, exc)


def _left_result(ctl: Controller, attempt: Attempt) -> ChildResult | None:
    """The result the child wrote before its daemon died, when the job folder is on this host."""
    job_dir = Path(ctl.cfg.home) / "retrains" / attempt.id
    if not (job_dir / "result.json").is_file():
        return None
    result = read_result(job_dir, None)
    return result if result.ok else None


def _from_registry(v: AttemptVersion, champion_now: str | None) -> ChildResult:
    """The outcome the child had decided: promoted when its version is champion, else the verdict
    it recorded (rejected, or held in shadow)."""
    recorded = (Outcome(v.outcome) if v.outcome in OUTCOMES
                and v.outcome not in (Outcome.PROMOTED, Outcome.FAILED, Outcome.INTERRUPTED) else None)
    status = Outcome.PROMOTED if v.is_champion else recorded or Outcome.REJECTED
    reasons = [r for r in (v.tags.get("driftloop.reasons") or "").splitlines() if r]
    return ChildResult(None, outcome={"outcome": status, "challenger_version": v.version, "run_id": v.run_id,
                                      "champion_version": v.version if v.is_champion else champion_now,
                                      "reasons": [f"{COMPLETED}: the old leader died after the gate"] + reasons})


def settle_dead_leaders_attempt(ctl: Controller, attempt: Attempt) -> Outcome:
    """Settle a ``running`` attempt whose daemon is gone (see the module docstring); returns its
    status. Called with ``ctl.lock`` held, after the child was stopped if it ran on this host."""
    left = _left_result(ctl, attempt)
    try:
        versions = attempt_versions(ctl.cfg, attempt)
    except DriftloopError as exc:  # MLflow down: cannot tell a promotion from an interruption
        log.warning("cannot ask the registry about retrain %s: %s", attempt.id, exc)
        if left is not None:
            ctl.settle(attempt, left)
            return ctl.attempts.get(attempt.id).status
        # The controller's own path: it asks the registry too, and says failed when it cannot.
        ctl.settle(attempt, ChildResult(None, error=f"the leader died during this retrain; the registry could "
                                                    f"not be asked whether it promoted: {exc}"))
        return ctl.attempts.get(attempt.id).status
    decided = [v for v in versions if v.is_champion] or [v for v in versions if v.outcome]
    if left is not None or decided:
        if left is None:
            champion_now = next((v.version for v in versions if v.is_champion), None)
            left = _from_registry(decided[-1], champion_now)
        ctl.settle(attempt, left)
        status = ctl.attempts.get(attempt.id).status
        tag_fate(ctl.cfg, versions, f"{COMPLETED}: {status}")
        return status
    if promoted_version(ctl.probe, attempt.incident_id, attempt.started_at, log.warning) is not None:
        # A reinstatement of an earlier version (trainer.previous) registers nothing of its own;
        # the controller's settling finds it through the probe and records the promotion.
        ctl.settle(attempt, ChildResult(None, error="the leader died after this retrain promoted"))
        return ctl.attempts.get(attempt.id).status
    tag_fate(ctl.cfg, versions, ORPHANED)
    end_runs(ctl.cfg, attempt)
    why = "interrupted: the leader died during this retrain" + (
        f" (version(s) {', '.join(v.version for v in versions)} registered before the gate: {ORPHANED})"
        if versions else "")
    interrupt(ctl, attempt, why)
    return Outcome.INTERRUPTED


def stopped_with_its_daemon(ctl: Controller, attempt: Attempt, why: str) -> None:
    """The child was stopped because its own daemon stopped (shut down, deposed): a version it
    registered without a verdict is tagged :data:`ORPHANED_BY_STOP`, the attempt is interrupted."""
    try:
        versions = attempt_versions(ctl.cfg, attempt)
    except DriftloopError as exc:
        log.warning("cannot tag the versions of the interrupted retrain %s: %s", attempt.id, exc)
        versions = []
    tag_fate(ctl.cfg, [v for v in versions if not v.outcome and not v.is_champion], ORPHANED_BY_STOP)
    end_runs(ctl.cfg, attempt)
    interrupt(ctl, attempt, why)


def interrupt(ctl: Controller, attempt: Attempt, why: str) -> None:
    """Record ``attempt`` as interrupted (its daemon died, shut down or was deposed under it); its
    incident goes to ``failed`` (the only way out of ``retraining``) with a message saying it is
    retried by the leader and not counted. A second settling (the new leader got there first) is
    ignored: the first word stands."""
    try:
        ctl.attempts.finish(attempt.id, Outcome.INTERRUPTED, error=why, reasons=[why],
                            duration_seconds=max(0.0, ctl.clock() - attempt.started_at))
    except ValueError:
        log.warning("retrain %s was already settled; ignoring its interruption", attempt.id)
        return
    try:
        ctl.incidents.transition(attempt.incident_id, State.FAILED,
                                 f"{why}; retried by the leader (not counted as a failed retrain)",
                                 outcome_reasons=[why])
    except TransitionError as exc:
        log.warning("%s", exc)


def retry_interrupted(ctl: Controller) -> list[str]:
    """Start again the retrain of each open incident whose latest attempt was interrupted: no
    cooldown, no new evidence needed (single-flight still holds). Returns what it did."""
    done: list[str] = []
    for incident in ctl.incidents.open_incidents():
        if not incident.state.is_outcome:
            continue
        tries = ctl.attempts.for_incident(incident.id)
        if not tries or tries[-1].status != Outcome.INTERRUPTED:
            continue
        trigger = tries[-1].trigger
        try:
            started = ctl.maybe_retrain(incident, trigger, respect_cooldown=trigger == "alert")
        except DriftloopError as exc:  # the store or the child's start failed: the next check retries
            log.warning("could not retry the interrupted retrain of incident %s: %s", incident.id, exc)
            continue
        done.append(f"incident {incident.id}: interrupted retrain {tries[-1].id} retried: {started}")
    return done
