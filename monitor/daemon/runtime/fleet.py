"""A deployment of many models in one process: one :class:`Daemon` per model, sharing what is shared.

Each model of the configuration (``models:``, ``models_dir:``, or the single model of a plain file)
gets its own :class:`~monitor.daemon.runtime.daemon.Daemon`: its store tables, champion, policy
state, incidents, attempts and leader lease, keyed by its name as they always were. The fleet owns
what they share: one store engine (one connection pool; migrations once), one scheduler whose
bounded pool runs every model's checks (``fleet.check_workers``), one retrain queue
(``fleet.max_concurrent_retrains``, :mod:`monitor.daemon.retraining.slots`), one metrics registry
(process, build and GPU metrics once; the models' families merged, :mod:`.fleet_metrics`) and, on
PostgreSQL, the balancing of leases between the daemons sharing the store.

A model that cannot be built (its champion's schema contradicts its configuration, its store tables
cannot be synchronised) is reported in :attr:`Fleet.failed` and ``GET /v1/models`` while the others
run; a single-model deployment fails as it always did. :meth:`Fleet.reload` applies a new
configuration: models added are started, models removed are stopped, models whose configuration
changed are rebuilt, and the others are not touched.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from prometheus_client import CollectorRegistry

from monitor import logs
from monitor.buildinfo import register_self_metrics
from monitor.config import DriftloopConfig
from monitor.daemon.retraining.slots import RetrainSlots
from monitor.daemon.runtime.leader import LockSession
from monitor.daemon.runtime.membership import Balancer, Membership
from monitor.daemon.runtime.scheduler import SharedScheduler
from monitor.daemon.runtime.views import iso

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from monitor.daemon.runtime.daemon import Daemon

log = logging.getLogger(__name__)


def retrain_limit(cfg: DriftloopConfig) -> int:
    """``fleet.max_concurrent_retrains``, else one per GPU NVML sees, else 1."""
    if cfg.fleet.max_concurrent_retrains is not None:
        return cfg.fleet.max_concurrent_retrains
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            return max(1, int(pynvml.nvmlDeviceGetCount()))
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVML, no driver, no GPU: train on the CPU, one at a time
        return 1


def _fingerprint(cfg: DriftloopConfig) -> str:
    return cfg.model_dump_json(exclude={"server": {"token"}})


class Fleet:
    """See the module doc. ``prepare`` turns a model's configuration into the one it runs with
    (``serve`` checks it against its champion's schema); ``daemon_kwargs`` go to every Daemon
    (tests inject clocks, launchers, probes)."""

    def __init__(self, cfg: DriftloopConfig, *, registry: CollectorRegistry | None = None, gpu: bool | None = None,
                 prepare: Callable[[DriftloopConfig], DriftloopConfig] | None = None,
                 clock: Callable[[], float] = time.time, daemons: dict[str, Daemon] | None = None,
                 **daemon_kwargs: Any):
        from monitor.daemon.runtime.fleet_metrics import FleetCollector

        self.cfg = cfg
        self.clock = clock
        self._prepare = prepare or (lambda c: c)
        self._daemon_kwargs = daemon_kwargs
        self._lock = threading.RLock()
        if daemons:  # already built: their one registry has everything but the fleet's own families
            registry = next(iter(daemons.values())).registry
            gpu = False
        if registry is None:
            registry = CollectorRegistry(auto_describe=True)
            register_self_metrics(registry, "serve")  # process_*, python_*, driftloop_build_info
        self.registry = registry
        self.jobs = SharedScheduler(cfg.fleet.check_workers)
        # A waiting model claims again at every check: a place unclaimed for two of its intervals is stale.
        longest = max(c.drift.interval_seconds for c in cfg.model_configs().values())
        self.slots = RetrainSlots(retrain_limit(cfg), clock, ttl=2 * longest + 60)
        self.slots.on_free.append(self.jobs.check_soon)
        self.daemons: dict[str, Daemon] = {}
        self.registries: dict[str, CollectorRegistry] = {}
        self.failed: dict[str, str] = {}
        self._fingerprints: dict[str, str] = {}
        self._engine: Engine | None = None
        self._started = False
        self._scheduler_on = True
        self._check_interval: float | None = None
        self.balancer: Balancer | None = None
        self._lease_session: LockSession | None = None
        if daemons:  # already built (tests, the demo): hosted as they are, scheduled by themselves
            if len(daemons) != 1:
                raise ValueError("a fleet of daemons built elsewhere hosts exactly one")
            self.daemons.update(daemons)
        else:
            configs = cfg.model_configs()
            for name, model_cfg in configs.items():
                self._add(name, model_cfg, fatal=len(configs) == 1 and not cfg.is_fleet)
        self.registry.register(FleetCollector(self))
        self._gpu_close: Callable[[], None] | None = None
        if cfg.server.gpu_metrics if gpu is None else gpu:
            from monitor.gpu import build_gpu_collector
            collector, self._gpu_close = build_gpu_collector(cfg.exporter)
            self.registry.register(collector)
        self.balancer = self._balancer()

    # -- models -----------------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return list(self.daemons)

    def get(self, name: str) -> Daemon | None:
        return self.daemons.get(name)

    def _add(self, name: str, model_cfg: DriftloopConfig, *, fatal: bool) -> Daemon | None:
        from monitor.daemon.runtime.daemon import Daemon
        from monitor.store import PredictionStore

        try:
            model_cfg = self._prepare(model_cfg)
            store = PredictionStore.from_config(model_cfg, engine=self._engine)
            if self._engine is None:
                self._engine = store.engine  # the first model's engine serves every model
                store._owns_engine = False
            if self._lease_session is None and self._engine.dialect.name == "postgresql":
                # One connection holds every model's leader lock (not one per model: max_connections).
                self._lease_session = LockSession(self._engine, self.cfg.server.leader_lease_seconds)
            registry = CollectorRegistry(auto_describe=True)
            daemon = Daemon(model_cfg, store=store, registry=registry, gpu=False, jobs=self.jobs, slots=self.slots,
                            clock=self.clock, lease_session=self._lease_session, **self._daemon_kwargs)
        except Exception as exc:
            if fatal:
                raise
            log.error("model %r is not running: %s", name, exc)
            self.failed[name] = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            return None
        self.failed.pop(name, None)
        self.daemons[name] = daemon
        logs.many_models = len(self.daemons) > 1
        self.registries[name] = registry
        self._fingerprints[name] = _fingerprint(model_cfg)
        if self._started:
            if self.balancer is not None:  # asked before its first try for the lease
                self.balancer.add(daemon.leadership)
            daemon.start(scheduler=self._scheduler_on, check_interval=self._check_interval)
        log.info("model %r (%s) added", name, model_cfg.model.task)
        return daemon

    def _remove(self, name: str) -> None:
        daemon = self.daemons.pop(name, None)
        self.registries.pop(name, None)
        self._fingerprints.pop(name, None)
        self.slots.forget(name)
        if daemon is None:
            return
        if self.balancer is not None:
            self.balancer.remove(daemon.leadership)
        daemon.stop()
        log.info("model %r removed", name)

    def reload(self, cfg: DriftloopConfig) -> dict[str, list[str]]:
        """Apply ``cfg``: start new models, stop removed ones, rebuild changed ones; the others keep
        running untouched. Returns the names by what happened to them."""
        with self._lock:
            configs = cfg.model_configs()
            done: dict[str, list[str]] = {"added": [], "removed": [], "changed": [], "unchanged": []}
            for name in [n for n in [*self.daemons, *self.failed] if n not in configs]:
                self._remove(name)
                self.failed.pop(name, None)
                done["removed"].append(name)
            for name, model_cfg in configs.items():
                if name in self.daemons:
                    if self._fingerprints.get(name) == _fingerprint(self._prepare_quietly(model_cfg, name)):
                        done["unchanged"].append(name)
                        continue
                    self._remove(name)
                    done["changed"].append(name)
                else:
                    done["added"].append(name)
                self._add(name, model_cfg, fatal=False)
            self.cfg = cfg
            log.info("reloaded: %s", "; ".join(f"{k} {', '.join(v)}" for k, v in done.items() if v) or "no models")
            return done

    def _prepare_quietly(self, model_cfg: DriftloopConfig, name: str) -> DriftloopConfig:
        try:
            return self._prepare(model_cfg)
        except Exception:
            return model_cfg  # differs from the running one's prepared form: rebuilt, and its error reported then

    # -- lifecycle --------------------------------------------------------------------------
    def _balancer(self) -> Balancer | None:
        """Lease balancing between daemons sharing a PostgreSQL store (None on SQLite: one daemon)."""
        if self._engine is None or self._engine.dialect.name != "postgresql":
            return None
        membership = Membership(self._engine, self.cfg.server.leader_lease_seconds)
        return Balancer(membership, self.cfg.server.leader_lease_seconds,
                        [d.leadership for d in self.daemons.values()])

    def start(self, *, scheduler: bool = True, check_interval: float | None = None) -> None:
        with self._lock:
            self._scheduler_on, self._check_interval = scheduler, check_interval
            if scheduler:
                self.jobs.start()
            if self.balancer is not None and scheduler:
                self.balancer.start()
            for daemon in self.daemons.values():
                daemon.start(scheduler=scheduler, check_interval=check_interval)
            self._started = True

    def stop(self, grace: float = 10.0) -> None:
        with self._lock:
            if self.balancer is not None:
                self.balancer.stop()
            # The shared pool first: queued checks are dropped and the running ones finish against
            # open stores; then each model (its retrain aborted and settled, its store closed).
            self.jobs.shutdown(wait=True)
            for daemon in list(self.daemons.values()):
                try:
                    daemon.stop(grace=grace)
                except Exception:
                    log.exception("stopping model %r failed", daemon.cfg.model.name)
            if self._lease_session is not None:
                self._lease_session.close()
            if self._gpu_close is not None:
                self._gpu_close()
                self._gpu_close = None
            if self._engine is not None:
                self._engine.dispose()
            self._started = False

    # -- views ------------------------------------------------------------------------------
    def summary(self, name: str) -> dict[str, Any]:
        """One model as ``GET /v1/models`` lists it."""
        daemon = self.daemons.get(name)
        if daemon is None:
            return {"name": name, "state": "failed", "error": self.failed.get(name), "url": f"/v1/models/{name}"}
        ctl = daemon.controller
        leader = daemon.is_leader
        report = ctl.last_check
        last_check = {"state": report.outcome.status, "at": iso(report.outcome.ts)} if report else None
        retraining: Any = ctl.supervisor.busy
        incident = None
        try:
            current = ctl.incidents.current()
            incident = ({"id": current.id, "state": str(current.state), "reason": str(current.reason)}
                        if current else None)
            if not leader:  # another daemon checks and retrains this model: the store knows, not our memory
                row = ctl.checklog.last()
                last_check = {"state": row["status"], "at": iso(row["ts"])} if row else None
                retraining = ctl.attempts.running() is not None
        except Exception as exc:  # the store is down: the rest of the listing still answers
            incident = {"error": f"store unavailable: {type(exc).__name__}"}
        return {"name": name, "task": str(daemon.cfg.model.task), "state": "running" if daemon._started else "stopped",
                "leader": leader, "champion": daemon.champion.last_version,
                "last_check": last_check,
                "retraining": retraining, "incident": incident,
                "check_interval_seconds": daemon._check_interval, "url": f"/v1/models/{name}"}

    def listing(self) -> dict[str, Any]:
        running, queue = self.slots.snapshot()
        names = [*self.daemons, *[n for n in self.failed if n not in self.daemons]]
        return {"models": [self.summary(n) for n in names],
                "retrains": {"limit": self.slots.limit, "running": running, "queue": [p.model for p in queue]},
                "checks": {"workers": self.jobs.workers, "waiting": self.jobs.waiting()}}
