"""The daemon behind ``driftloop serve``: scheduled checks, the alert policy, incidents,
retraining in a child process, and its HTTP endpoints and metrics.

    from monitor.daemon import Daemon
    daemon = Daemon(cfg)           # see monitor/daemon/runtime/daemon.py for the in-process API
    daemon.start(); ...; daemon.stop()

Names are imported lazily: ``import monitor.daemon.state.tables`` (which registers the daemon's
migrations with the store) must not pull in FastAPI, MLflow or the trainer.

    policy.py      AlertPolicy (pure; injected clock)      incidents.py  IncidentStore (state machine)
    checks.py      CheckJob (one check)                     attempts.py   AttemptStore (single-flight)
    controller.py  Controller (decisions)                   supervisor.py RetrainSupervisor (child watch)
    launcher.py    ProcessLauncher (job folder protocol)    worker.py     the child's entry point
    recovery.py    start-up settling                        registry.py   MLflow ground truth
    triggers.py    Alertmanager / manual / schedule         alertmanager.py webhook payload
    metrics.py     DaemonCollector                          status.py     status body and text
    scheduler.py   APScheduler jobs                         serve.py      ``driftloop serve``
    api.py         /v1/alerts, /v1/retrain, /v1/status      schema.py / tables.py  the store tables
"""
from __future__ import annotations

from monitor.lazy import lazy_attributes

__all__ = ["AlertPolicy", "CheckOutcome", "CheckReport", "Daemon", "Incident", "Observation", "Verdict"]

_WHERE = {
    "AlertPolicy": "monitor.daemon.decisions.policy", "Observation": "monitor.daemon.decisions.policy",
    "Verdict": "monitor.daemon.decisions.policy",
    "CheckOutcome": "monitor.daemon.runtime.checks", "CheckReport": "monitor.daemon.runtime.controller",
    "Daemon": "monitor.daemon.runtime.daemon", "Incident": "monitor.daemon.state.incidents",
}

__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
