"""The daemon, composed: store, checks, alert policy, incidents, retrain worker, metrics, API.

In-process use (tests, ``driftloop demo``)::

    daemon = Daemon(cfg)              # opens the store (migrations run), wires everything
    app = daemon.build_app()          # FastAPI app: ingestion + /v1/alerts, /v1/retrain, /v1/status, /metrics
    daemon.start()                    # recovery, then the scheduler (first check after 1 s)
    report = daemon.run_check_now()   # one check, acted upon (may open an incident and retrain)
    daemon.wait_for_retrain(600)      # block until the retrain child has finished and is settled
    daemon.stop()                     # scheduler, retrain child, GPU collector, store

Every side effect can be injected (store, registry, clock, launcher, champion source,
registry probe, evaluation and report saving), which is how the tests drive it.
"""
from __future__ import annotations

import logging
import time
from functools import partial
from typing import TYPE_CHECKING, Any, Callable

from prometheus_client import CollectorRegistry

from monitor.buildinfo import register_self_metrics
from monitor.config import DriftloopConfig
from monitor.daemon.state.attempts import AttemptStore
from monitor.daemon.retraining.champion import ChampionCache, NoChampionError
from monitor.daemon.state.attempts import BusyError
from monitor.daemon.state.checklog import CheckLog
from monitor.daemon.state import history_citations
from monitor.daemon.runtime.checks import CheckJob, champion_rows
from monitor.daemon.runtime.controller import CheckReport, Controller
from monitor.daemon.runtime.estimation_watch import EstimationWatch
from monitor.daemon.state.incidents import IncidentStore
from monitor.daemon.retraining.launcher import Launcher, ProcessLauncher, read_progress
from monitor.daemon.runtime.leader import LeaderElection, NotLeaderError
from monitor.daemon.runtime.metrics import DaemonCollector
from monitor.daemon.runtime.monitoring_run import MonitoringFeed, RunLog
from monitor.daemon.decisions.policy import AlertPolicy
from monitor.daemon.retraining.recovery import recover
from monitor.daemon.retraining.review import ChampionReview
from monitor.daemon.retraining.improve import Improvement
from monitor.daemon.retraining.registry import MlflowProbe, RegistryProbe
from monitor.daemon.runtime.scheduler import build_scheduler
from monitor.daemon.runtime.views import collect_status
from monitor.daemon.runtime.triggers import (
    TriggerResult, handle_alertmanager, hold_for_leader, request_retrain, take_held)
from monitor.daemon.state import INBOX_SECONDS
from monitor.daemon.runtime.wiring import LazyEvaluator, ReportSaver, default_champion, shadow_observer
from monitor.errors import RegistryError
from monitor.store.engine import write_transaction
from monitor.tasks import task_of
from trainer.monitoring_runs import MonitoringRuns

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd
    from fastapi import FastAPI

    from monitor.daemon.retraining.slots import RetrainSlots
    from monitor.daemon.runtime.alertmanager import WebhookPayload
    from monitor.daemon.runtime.leader import LockSession
    from monitor.daemon.runtime.scheduler import SharedScheduler
    from monitor.drift.result import CheckResult
    from monitor.store import PredictionStore

log = logging.getLogger(__name__)

FOLLOWER_LOOKUP_SECONDS = 10.0  # how old a follower's champion version may get before it asks again


class Daemon:
    def __init__(self, cfg: DriftloopConfig, *, store: PredictionStore | None = None,
                 registry: CollectorRegistry | None = None,
                 clock: Callable[[], float] = time.time, launcher: Launcher | None = None,
                 champion: ChampionCache | None = None, probe: RegistryProbe | None = None,
                 evaluate: Callable[..., CheckResult] | None = None,
                 save_report: Callable[[CheckResult, float], tuple[Path | None, Path | None]] | None = None,
                 gpu: bool | None = None, jobs: SharedScheduler | None = None, slots: RetrainSlots | None = None,
                 lease_session: LockSession | None = None, monitoring: RunLog | None = None):
        """``jobs``, ``slots`` and ``lease_session``: the deployment's shared scheduler, retrain queue and
        PostgreSQL lock connection when it hosts several models (:class:`~monitor.daemon.runtime.fleet.Fleet`);
        alone, the daemon has its own. ``monitoring``: where each check's figures go (the champion's
        monitoring run in MLflow, :mod:`trainer.monitoring_runs`, unless given)."""
        from monitor.daemon.decisions.rules import check_rules_fit
        check_rules_fit(cfg)  # the champion's task is known by now (configured, or applied by with_champion_schema)
        self.cfg = cfg
        self.clock = clock
        if store is None:
            from monitor.store import PredictionStore
            store = PredictionStore.from_config(cfg)
        self.store = store
        engine, model = store.engine, cfg.model.name
        # The state first: the parts below read it directly, never through the daemon.
        checklog = CheckLog(engine, model, clock)
        incidents, attempts = IncidentStore(engine, model, clock), AttemptStore(engine, model, clock)
        self.champion = champion or default_champion(cfg, checklog.last_champion)
        if evaluate is None:
            evaluate = LazyEvaluator(clock)
        if save_report is None:
            # A partial, not a lambda: the saver calls into the state room directly, not back into this file.
            save_report = ReportSaver(cfg, partial(history_citations, engine, model))
        # The label-free estimate, recalibrated on the champion's labelled rows when labels keep
        # proving it wrong (drift.estimation_recalibrate_windows).
        self.estimation = EstimationWatch(cfg, self._labelled_rows, clock)
        check_job = CheckJob(cfg, store, self.champion, evaluate, save_report, clock,
                             estimator=self.estimation.estimator, tenure=attempts.returned_at)
        self.controller = Controller(
            cfg, store, check_job, checklog, incidents, attempts,
            AlertPolicy(cfg.alerts, cfg.drift.min_labels, cfg.drift.min_rows, cfg.drift),
            launcher or ProcessLauncher(cfg.home / "retrains"),
            self.champion, probe or MlflowProbe(cfg, self.known_champion),
            clock, shadow=shadow_observer(cfg) if cfg.training.shadow.windows else None,
            estimation=self.estimation)
        self.review = ChampionReview(self.controller, clock)
        self.improvement = Improvement(self.controller)
        self._jobs = jobs
        if slots is not None:
            self.controller.slots = slots
            self.controller.supervisor.on_idle.append(partial(slots.release, cfg.model.name))
            # The queue holds models with a live claim: an incident that ends, however, gives up its place.
            incidents.on_end.append(lambda _ended: slots.forget(model))
        if registry is None:
            registry = CollectorRegistry(auto_describe=True)
            register_self_metrics(registry, "serve")  # process_*, python_*, driftloop_build_info
        self.registry = registry
        self.registry.register(DaemonCollector(self.controller, self.served_version,
                                               lambda: self.is_leader))
        self._register_model_metrics()
        self._gpu_close: Callable[[], None] | None = None
        if cfg.server.gpu_metrics if gpu is None else gpu:
            from monitor.gpu import build_gpu_collector
            collector, self._gpu_close = build_gpu_collector(cfg.exporter)
            self.registry.register(collector)
        self._scheduler = None
        # Called with every check's report after it is acted upon, in the check's thread; must not raise.
        self.after_check: list[Callable[[CheckReport], None]] = []
        self.monitoring = MonitoringFeed(monitoring or MonitoringRuns(cfg))
        self.after_check.append(self.monitoring)  # the champion's monitoring run; in the background
        self._started = False
        self._with_scheduler = True
        self._check_interval = cfg.drift.interval_seconds
        self.leadership = LeaderElection(store.engine, cfg.model.name, cfg.server.leader_lease_seconds,
                                         on_elected=self._lead, on_deposed=self._follow, session=lease_session)

    # -- composition ----------------------------------------------------------------------
    def _labelled_rows(self, version: str) -> pd.DataFrame:
        """The champion's labelled rows of the current window (what a recalibration fits on)."""
        return champion_rows(self.controller.check_job.current_window(labelled_only=True), version,
                             returned=self.controller.attempts.returned_at(version) is not None)

    def _register_model_metrics(self) -> None:
        from monitor.drift import ModelMetricsCollector
        self.registry.register(ModelMetricsCollector(self.cfg.model.name, self._latest_result,
                                                     class_top_k=self.cfg.model.segment_top_k))

    def _latest_result(self) -> CheckResult | None:
        """The latest successful check's result: a failed check leaves the last good values up
        (``driftloop_model_last_check_timestamp_seconds`` shows their age)."""
        return self.controller.last_result

    def build_app(self) -> FastAPI:
        """The FastAPI app: ingestion (``/v1/predictions``, ``/v1/labels``, ``/metrics``,
        ``/healthz``) plus the daemon's endpoints."""
        from monitor.daemon.runtime.api import build_router
        from monitor.ingest import create_app
        from monitor.ingest.security import require_token

        app = create_app(self.cfg, self.store, self.registry)
        app.include_router(build_router(self, require_token))
        from monitor.daemon.runtime.runbooks import build_router as runbooks_router
        app.include_router(runbooks_router())  # no token: the alerts' runbook_url opens here
        app.state.readiness.add("mlflow", self.check_registry)
        # A service that does not send model_version scored its rows with the champion of the moment:
        # stored as that version, a promoted challenger is judged on its own rows, not its predecessor's.
        app.state.ingest_handler.assumed_version = self.served_version
        return app

    def served_version(self) -> str | None:
        """The champion version rows without ``model_version`` are stored as, and /metrics shows.
        The leader's is current (each check asks; a promotion sets it). A follower runs no checks:
        its lookup is repeated in the background once it is ``FOLLOWER_LOOKUP_SECONDS`` old, so a
        promotion by the leader reaches the rows it stores within about that (it kept the old
        version until a restart, or a call of its /status)."""
        if self.is_leader:
            return self.champion.last_version
        return self.champion.recent_version(FOLLOWER_LOOKUP_SECONDS)

    def known_champion(self) -> str | None:
        """A champion version this daemon (or a check on record) has served, if any: its registry
        must not silently be recreated empty."""
        if self.champion.last_version is not None:
            return self.champion.last_version
        return self.controller.checklog.last_champion()

    def check_registry(self) -> None:
        """Raise RegistryError unless MLflow can be used now (reachable; a SQLite registry writable,
        and present when a champion was served from it)."""
        from trainer import registry as reg
        reg.check_reachable(self.cfg, self.known_champion())

    # -- lifecycle ------------------------------------------------------------------------
    def start(self, *, scheduler: bool = True, check_interval: float | None = None) -> None:
        """Take part in leader election (always the leader on SQLite); as the leader, settle what
        a previous run left half done, then start the scheduled jobs (``check_interval`` overrides
        ``drift.interval_seconds``). ``scheduler=False`` (tests, the demo): act as the leader, with
        no scheduled jobs."""
        self._check_interval = check_interval or self.cfg.drift.interval_seconds
        self._with_scheduler = scheduler
        if scheduler:
            self.leadership.start()
        else:
            recover(self.controller)  # logs what it settled
        self._started = True
        self._last_served_champion()

    def _last_served_champion(self) -> None:
        """The champion the last check on record served, as this daemon's until its first check asks
        the registry (up to a check interval later, tens of seconds in a busy fleet): rows a service
        sends without ``model_version`` are stored as it meanwhile, and ``/v1/models`` and
        ``driftloop_model_champion_info`` show it. From the store, not MLflow: nothing to wait for."""
        if self.champion.last_version is not None:
            return
        try:
            self.champion.last_version = self.controller.checklog.last_champion()
        except Exception as exc:  # the store is down: the first check says so
            log.info("champion version not known at start: %s", exc)

    @property
    def is_leader(self) -> bool:
        # In-process use without the scheduler (tests, the demo) acts as the leader; so does a daemon
        # not started yet on one host (SQLite). On a shared PostgreSQL store only the election says
        # so: until this daemon has won it (while `serve` starts its models), another may lead.
        return (self.leadership.is_leader or not self._with_scheduler
                or (not self._started and self.leadership.single))

    def _lead(self) -> None:
        recover(self.controller)  # logs what it settled
        # Followers hold alerts for the leader only where there can be followers (a shared store).
        inbox = None if self.leadership.single else self.take_held_alerts
        if self._jobs is not None:
            self._jobs.add_model(
                self.cfg.model.name, check=self.run_check_now, check_interval=self._check_interval,
                retention=self.apply_retention,
                retrain=self._scheduled_retrain,
                retrain_cron=self.cfg.alerts.retrain_cron, on_check_error=self._check_failed,
                inbox=inbox, inbox_interval=INBOX_SECONDS)
            return
        self._scheduler = scheduler = build_scheduler(
            check=self.run_check_now, check_interval=self._check_interval,
            retention=self.apply_retention,
            retrain=self._scheduled_retrain,
            retrain_cron=self.cfg.alerts.retrain_cron, on_check_error=self._check_failed,
            inbox=inbox, inbox_interval=INBOX_SECONDS)
        scheduler.start()

    def _follow(self) -> None:
        """Deposed: stop the scheduler and a running retrain (the new leader settles it)."""
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None:
            scheduler.shutdown(wait=False)
        if self._jobs is not None:
            self._jobs.remove_model(self.cfg.model.name)
        self.controller.supervisor.stop(grace=5)

    def _require_leader(self) -> None:
        if not self.is_leader:
            raise NotLeaderError("this daemon is a follower: the leader (another driftloop serve on this store) acts "
                                 "on alerts and retrains; retry, or send to the leader")

    def _check_failed(self, exc: BaseException) -> None:
        # The check could not even be recorded (the store is down): count it here instead.
        self.controller.unrecorded_errors += 1

    def stop(self, grace: float = 10.0) -> None:
        """Stop the scheduler (a running check finishes), abort a running retrain (it is settled
        against the registry, so a promotion that just happened is kept), close everything."""
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=True)
            self._scheduler = None
        if self._jobs is not None:
            self._jobs.remove_model(self.cfg.model.name)
        self.controller.supervisor.stop(grace=grace)
        self.monitoring.flush(min(grace, 5.0))  # the last checks' figures, if MLflow answers in time
        self.leadership.stop()  # releases the lock: a follower takes over at once
        if self._gpu_close is not None:
            self._gpu_close()
            self._gpu_close = None
        close = getattr(self.store, "close", None)
        if close is not None:
            close()
        self._started = False

    # -- actions --------------------------------------------------------------------------
    def run_check_now(self) -> CheckReport:
        report = self.controller.run_check()
        self.review.after_check(report)  # training.review_interval_checks; never raises
        self.improvement.after_check(report)  # training.improve_below_reference; never raises
        for listener in self.after_check:
            listener(report)
        return report

    def retrain_now(self, trigger: str = "manual", detail: str = "manual retrain") -> TriggerResult:
        """Raises RegistryError (answered 503) while MLflow cannot take the retrain's results,
        NoChampionError (409) when there is no champion to warm-start from, and NotLeaderError on a
        follower."""
        self._require_leader()
        self.check_registry()
        if self.champion.version() is None:  # a retrain warm-starts the champion: it could only fail
            with write_transaction(self.store.engine):  # but a store outage answers first (503), as the
                pass                                    # request's own write would, within its wait
            raise NoChampionError("the registry has no champion to retrain: train one with `driftloop train`, "
                                  f"or set the `champion` alias on a version of {self.cfg.registered_model_name!r}")
        return request_retrain(self.controller, trigger, detail)

    def _scheduled_retrain(self) -> None:
        """``alerts.retrain_cron``: a retrain now, or one log line saying why not (no champion yet, a
        retrain already running): the schedule comes again."""
        try:
            self.retrain_now("schedule", f"cron {self.cfg.alerts.retrain_cron}")
        except (NoChampionError, BusyError) as exc:
            log.warning("scheduled retrain not started: %s", exc)

    def handle_alerts(self, payload: WebhookPayload) -> TriggerResult:
        """Raises RegistryError (answered 503: Alertmanager re-sends) while MLflow cannot be used,
        rather than starting a retrain that could only fail. A follower holds the alerts concerning
        its model in the shared store for the model's leader (:meth:`take_held_alerts`; 503 when
        they pile up unread)."""
        if not self.is_leader:
            if self.leadership.single:
                raise NotLeaderError("this daemon is not running its model yet; retry")
            return hold_for_leader(self.controller, payload)
        self.check_registry()
        return handle_alertmanager(self.controller, payload)

    def take_held_alerts(self) -> int:
        """The leader's job: act on the Alertmanager deliveries followers held for this model."""
        if not self.is_leader:
            return 0

        def ready() -> None:
            self._require_leader()
            self.check_registry()  # MLflow down: the deliveries wait in the store, as Alertmanager would re-send
        try:
            return take_held(self.controller, ready)
        except (RegistryError, NotLeaderError) as exc:  # they wait; the next run tries again
            log.warning("Alertmanager deliveries held by followers wait: %s", exc)
            return 0

    def wait_for_retrain(self, timeout: float | None = None) -> bool:
        return self.controller.supervisor.wait_idle(timeout)

    def apply_retention(self) -> None:
        days = self.cfg.store.retention_days
        if days is None:
            return
        removed = self.store.apply_retention(days)
        pruned = self.controller.checklog.prune(self.clock() - days * 86400)
        log.info("retention: %s prediction rows and %d check rows older than %g days removed", removed, pruned, days)

    def status(self, limit: int = 5) -> dict[str, Any]:
        c = self.controller
        jobs = self.cfg.home / "retrains"  # ProcessLauncher's job folders: a running retrain's progress.json
        return collect_status(self.cfg.model.name, self.champion.version, c.checklog, c.incidents, c.attempts,
                              limit=limit, levels=c.levels, progress=lambda attempt: read_progress(jobs / attempt),
                              extra={"daemon": {"running": self._started, "leader": self.is_leader,
                                                "check_interval_seconds": self._check_interval},
                                     "review": {"last": self.review.last},
                                     "improvement": {"last": self.improvement.last}})

    def reset_reference(self) -> dict[str, Any]:
        """Accept the champion's baseline as the reference level (a concept that became harder for
        good); noted on the open incident. Raises NoChampionError without a champion."""
        c = self.controller
        with c.lock:
            champion = self.champion.get()
            metrics = dict(champion.baseline.metrics)
            c.levels.reset(str(champion.version), metrics.get("accuracy"), metrics.get("roc_auc"), metrics.get("mae"))
            current = c.incidents.current()
            figures = task_of(self.cfg.model).reference_figures(metrics)
            message = f"reference level reset to champion v{champion.version}'s baseline ({figures})"
            if current is not None:
                c.incidents.note(current.id, "reference_reset", message)
            log.warning("%s", message)
            mae = {"reference_mae": metrics.get("mae")} if "mae" in metrics else {}
            return {"version": str(champion.version), "reference_accuracy": metrics.get("accuracy"), **mae,
                    "reference_roc_auc": metrics.get("roc_auc"), "incident": current.id if current else None}

