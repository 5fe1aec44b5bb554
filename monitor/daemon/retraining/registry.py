"""What the MLflow registry knows about an incident's retrains: the ground truth a restarted
daemon (or an aborted child) is settled against, so that a promotion is never lost and never
done twice.

The trainer tags every retrain run with the incident id (``trainer.retrain(...,
incident_id=...)``); a registered version points at its run. A version of this incident whose
run started after the attempt began, and which the ``champion`` alias points at, means the
attempt promoted; so does a reinstatement run of this incident (an earlier version made champion
again, ``trainer.previous.reinstate``) whose version the alias points at.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from monitor.config import DriftloopConfig
from monitor.errors import RegistryError

INCIDENT_TAG = "driftloop.incident_id"  # set by trainer.runs.lineage_tags
REINSTATED_TAG = "driftloop.version"     # on a reinstatement run: the version it makes champion


@dataclass(frozen=True)
class IncidentVersion:
    version: str
    run_id: str
    is_champion: bool


class RegistryProbe(Protocol):
    def incident_versions(self, incident_id: str, since: float) -> list[IncidentVersion]: ...


class MlflowProbe:
    """The registry through the trainer's boundary (bounded timeouts; errors are RegistryError)."""

    def __init__(self, cfg: DriftloopConfig, known_champion: Callable[[], str | None] = lambda: None):
        self._cfg = cfg
        self._known_champion = known_champion

    def incident_versions(self, incident_id: str, since: float) -> list[IncidentVersion]:
        """Versions registered from runs tagged with ``incident_id`` that started at or after
        ``since`` (epoch seconds; a 5 s allowance covers clock granularity)."""
        from trainer import registry as reg

        reg.check_reachable(self._cfg, self._known_champion())
        with reg.session(self._cfg), reg.translating(self._cfg, f"looking up incident {incident_id}"):
            registry = reg.Registry(self._cfg)
            experiment = registry.client.get_experiment_by_name(self._cfg.experiment_name)
            if experiment is None:
                return []
            runs = registry.client.search_runs([experiment.experiment_id],
                                               filter_string=f"tags.`{INCIDENT_TAG}` = '{incident_id}'",
                                               max_results=100)
            ours = [r for r in runs if r.info.start_time >= (since - 5) * 1000]
            if not ours:
                return []
            run_ids = {r.info.run_id for r in ours}
            champion = registry.alias_version(reg.CHAMPION)
            versions = registry.client.search_model_versions(f"name = '{registry.name}'")
        found = [IncidentVersion(str(v.version), str(v.run_id), str(v.version) == str(champion))
                 for v in versions if v.run_id in run_ids]
        # A reinstatement (trainer.previous.reinstate) registers nothing: its run names the earlier
        # version it moves the alias to, before moving it; the alias says whether it did.
        found += [IncidentVersion(str(r.data.tags[REINSTATED_TAG]), r.info.run_id,
                                  str(r.data.tags[REINSTATED_TAG]) == str(champion))
                  for r in ours if r.data.tags.get("driftloop.start") == "previous" and r.data.tags.get(REINSTATED_TAG)]
        return sorted(found, key=lambda v: int(v.version))


def promoted_version(probe: RegistryProbe, incident_id: str, since: float,
                     log_warning: Callable[[str], None] | None = None) -> IncidentVersion | None:
    """The version of this incident that is champion now, or None (also when MLflow is down:
    then the attempt is treated as not promoted and ``log_warning`` says so)."""
    try:
        for v in probe.incident_versions(incident_id, since):
            if v.is_champion:
                return v
    except RegistryError as exc:
        if log_warning:
            log_warning(f"cannot ask the registry about incident {incident_id}: {exc}")
    return None


def tag_run(cfg: DriftloopConfig, run_id: str | None, key: str, value: str) -> bool:
    """Set tag ``key`` on MLflow run ``run_id`` (a decision about it: the attainable level); False,
    logged, when MLflow cannot take it now (the decision itself is already recorded in the store)."""
    import logging

    if not run_id:
        return False
    from trainer import registry as reg
    try:
        with reg.session(cfg), reg.translating(cfg, f"tagging run {run_id}"):
            reg.Registry(cfg).client.set_tag(run_id, key, value[:4900])
        return True
    except Exception as exc:  # RegistryError, and the MLflow client's own kinds
        logging.getLogger(__name__).warning("could not tag MLflow run %s with %s: %s", run_id, key, exc)
        return False
