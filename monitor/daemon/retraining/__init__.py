"""Retraining: the child process (launcher, worker, supervisor), the MLflow registry as ground
truth, the champion, fail-over settling, the champion review and improvement retrains.

Imports :mod:`monitor.daemon.state` and :mod:`monitor.daemon.decisions`; the controller it reports
to is handed in and named for annotations only (one listed exception in ``tests/test_layers.py``:
start-up recovery calls it).

The room's one public entry: what other rooms import from it is listed in ``__all__`` (and can be
imported from the room itself, lazily); ``test_rooms_import_each_other_through_their_entries``
in ``tests/test_layers.py`` holds it.
"""
from __future__ import annotations

from monitor.lazy import lazy_attributes

__all__ = ["ChampionCache", "ChampionReview", "ChildResult", "Improvement", "Launcher", "MlflowProbe",
           "NoChampionError", "ProcessLauncher", "RegistryProbe", "RetrainJob", "RetrainSlots", "RetrainSupervisor",
           "mlflow_alias_lookup", "promoted_version", "read_progress", "recover", "slot_severity",
           "stopped_with_its_daemon", "tag_run"]

_WHERE = {
    "ChampionCache": "monitor.daemon.retraining.champion", "NoChampionError": "monitor.daemon.retraining.champion",
    "mlflow_alias_lookup": "monitor.daemon.retraining.champion",
    "stopped_with_its_daemon": "monitor.daemon.retraining.failover",
    "ChildResult": "monitor.daemon.retraining.launcher", "Launcher": "monitor.daemon.retraining.launcher",
    "ProcessLauncher": "monitor.daemon.retraining.launcher", "RetrainJob": "monitor.daemon.retraining.launcher",
    "read_progress": "monitor.daemon.retraining.launcher",
    "recover": "monitor.daemon.retraining.recovery", "MlflowProbe": "monitor.daemon.retraining.registry",
    "RegistryProbe": "monitor.daemon.retraining.registry", "promoted_version": "monitor.daemon.retraining.registry",
    "tag_run": "monitor.daemon.retraining.registry",
    "ChampionReview": "monitor.daemon.retraining.review",
    "Improvement": "monitor.daemon.retraining.improve",
    "RetrainSupervisor": "monitor.daemon.retraining.supervisor",
    "RetrainSlots": "monitor.daemon.retraining.slots", "slot_severity": "monitor.daemon.retraining.slots",
}

__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
