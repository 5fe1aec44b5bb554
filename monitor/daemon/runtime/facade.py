"""The daemon's one door for the CLI commands (``driftloop check``, ``status``, ``retrain``, ``serve``):
commands import from here and never from the daemon's modules, so the daemon can rearrange its
insides without touching them (tests/test_layers.py holds commands to it).

Names are imported on first use (:mod:`monitor.lazy`): ``driftloop status --help`` must not pay for
FastAPI, MLflow or Evidently.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monitor.lazy import lazy_attributes

if TYPE_CHECKING:  # pragma: no cover
    from monitor.config import DriftloopConfig

__getattr__, __dir__ = lazy_attributes(__name__, {
    "AttemptStore": "monitor.daemon.state.attempts",
    "AlertPolicy": "monitor.daemon.decisions.policy",
    "ReferenceLevels": "monitor.daemon.state.levels",
    "CheckJob": "monitor.daemon.runtime.checks",
    "check_rules_fit": "monitor.daemon.decisions.rules",
    "default_champion": "monitor.daemon.runtime.wiring",
    "history_citations": "monitor.daemon.state.citations",
    "install_signal_handlers": "monitor.daemon.runtime.serve",
    "observation": "monitor.daemon.runtime.controller",
    "render_check": "monitor.daemon.runtime.views",
    "render_incident": "monitor.daemon.runtime.views",
    "render_status": "monitor.daemon.runtime.views",
    "serve": "monitor.daemon.runtime.serve",
})


def read_status(cfg: DriftloopConfig, limit: int) -> dict:
    """``GET /v1/status``'s body, read from the store and MLflow directly (no daemon running)."""
    from monitor.daemon.state.attempts import AttemptStore
    from monitor.daemon.retraining.champion import mlflow_alias_lookup
    from monitor.daemon.retraining.launcher import read_progress
    from monitor.daemon.state.checklog import CheckLog
    from monitor.daemon.state.incidents import IncidentStore
    from monitor.daemon.state.levels import ReferenceLevels
    from monitor.daemon.runtime.views import collect_status
    from monitor.store import state_engine

    # A read: an embedded registry that does not exist yet is "no champion", not created empty.
    db = cfg.tracking_uri.removeprefix("sqlite:///") if cfg.tracking_uri.startswith("sqlite:///") else None
    lookup = (lambda: None) if db and db != ":memory:" and not Path(db).exists() else mlflow_alias_lookup(cfg)
    # The daemon's own tables only: the model's are left as they are, whatever cfg.model says.
    with state_engine(cfg) as engine:
        model = cfg.model.name
        return collect_status(model, lookup,
                              CheckLog(engine, model, time.time), IncidentStore(engine, model, time.time),
                              AttemptStore(engine, model, time.time), limit=limit,
                              levels=ReferenceLevels(engine, model),
                              progress=lambda attempt: read_progress(cfg.home / "retrains" / attempt))


def read_check(cfg: DriftloopConfig, check_id: str | None = None) -> dict[str, Any] | None:
    """One recorded check of cfg's model with its result (``CheckResult.to_dict()`` and more): by
    its row id or its 12-hex check id, or the last successful one (``None``); None when there is none."""
    from monitor.daemon.state.checklog import CheckLog
    from monitor.store import state_engine

    with state_engine(cfg) as engine:
        log = CheckLog(engine, cfg.model.name, time.time)
        return log.last("ok") if check_id is None else log.get(check_id)


def read_incident(cfg: DriftloopConfig, incident_id: str) -> dict[str, Any] | None:
    """One incident (open or closed) with its events and retrains; None when there is no such incident."""
    from monitor.daemon.state.attempts import AttemptStore
    from monitor.daemon.state.incidents import IncidentStore, TransitionError
    from monitor.daemon.runtime.views import collect_incident
    from monitor.store import state_engine

    with state_engine(cfg) as engine:
        model = cfg.model.name
        try:
            return collect_incident(IncidentStore(engine, model, time.time), AttemptStore(engine, model, time.time),
                                    incident_id)
        except TransitionError:
            return None
