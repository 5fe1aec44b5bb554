"""The daemon behind ``driftloop serve``: scheduled checks, the alert policy, incidents,
retraining in a child process, and its HTTP endpoints and metrics.

    from monitor.daemon import Daemon
    daemon = Daemon(cfg)           # see monitor/daemon/runtime/daemon.py for the in-process API
    daemon.start(); ...; daemon.stop()

Names are imported lazily: ``import monitor.daemon.state.tables`` (which registers the daemon's
migrations with the store) must not pull in FastAPI, MLflow or the trainer.

Four rooms; imports point one way, runtime → retraining → state → decisions (a lower room
names a higher one only for annotations, under ``if TYPE_CHECKING:``; ``tests/test_layers.py``):

    decisions/   pure, no I/O, no clock of its own: policy.py (AlertPolicy), rules.py (the user's
                 metric rules), breach.py (observation, breach, bars), kinds.py (states, reasons,
                 outcomes), lifecycle.py (the incident lifecycle table), actions.py (what a check
                 did), post_change.py (rows needed after a change), episodes.py (drift
                 hysteresis: DriftLatch), attainable.py (the level reachable after a change of concept)
    state/       the store's tables: incidents.py (IncidentStore), attempts.py (AttemptStore,
                 single-flight), checklog.py (CheckLog), deliveries.py (Alertmanager deliveries),
                 inbox.py (deliveries a follower holds for the model's leader),
                 levels.py (reference levels), citations.py (the checks incidents and retrains cite,
                 kept by history pruning), events.py (the bound of an event row), tables.py /
                 schema.py (tables and migrations)
    retraining/  the child and the registry: supervisor.py (child watch), launcher.py (job folder
                 protocol), worker.py (the child's entry point), registry.py (MLflow ground truth),
                 champion.py (ChampionCache), failover.py and recovery.py (start-up settling),
                 review.py (ChampionReview), improve.py (Improvement: a champion left below its level),
                 slots.py (the deployment's retrain queue across models)
    runtime/     the running daemon: daemon.py (Daemon) and wiring.py (its default collaborators),
                 checks.py (CheckJob), controller.py (acts on decisions) built in floors: moves.py
                 (incident moves through the lifecycle table), retrains.py (starting one, or why
                 not), settlement.py (how one ends), suspicion.py (suspected incidents);
                 scheduler.py (one model's jobs, or every model's on one pool: SharedScheduler),
                 leader.py, membership.py (leases balanced between daemons on PostgreSQL),
                 fleet.py (Fleet: many models in one daemon), fleet_http.py (/v1/models/{name}/…),
                 fleet_metrics.py (the models' metrics merged, the fleet's own),
                 serve.py (``driftloop serve``), heap.py (its heap frozen out of the collector's way),
                 api.py (/v1/alerts, /v1/retrain, /v1/status),
                 alertmanager.py (webhook payload), triggers.py, rescan.py, metrics.py
                 (DaemonCollector), estimation_watch.py, monitoring_run.py (each check's figures to
                 the champion's MLflow monitoring run), runbooks.py (/runbooks/<alert>: the rules'
                 runbook pages), facade.py (the commands' one door), and
                 views/ (presentation only, no writes; imported from its entry, views/__init__.py):
                 views/status.py (status, incident trail), views/render.py (one check),
                 views/segments.py (worst segment values), views/tasks.py (figures per task),
                 views/drifted_rows.py (the rows behind an embedding drift), views/constraints.py (a
                 check's constraint violations)
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
