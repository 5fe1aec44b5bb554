"""The monitoring run: one MLflow run per champion version, in the model's experiment, that the
daemon's checks log their figures to, one step per check, so MLflow's charts show how a version
did between the retrains that bracket it.

A run is found again by its tags (``driftloop.kind`` ``monitoring``, ``driftloop.model``,
``driftloop.version``), so a restarted daemon, or a new leader, continues the run its predecessor
logged to instead of starting another. It stays RUNNING while its version is champion; when
another version's run is opened (a promotion, a rollback, the alias moved by hand) every other
monitoring run of the model is set FINISHED, and a version that becomes champion again (a
rollback) has its own run re-opened, its steps continuing where they stopped. The registered
model version carries the run's id in its tag ``driftloop.monitoring_run``.

Only explicit clients are used here (never MLflow's fluent, process-wide active run or tracking
URI), so a daemon's background thread can log while a check or a retrain uses the fluent API.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Mapping, Sequence

from monitor.config import DriftloopConfig
from trainer import registry as reg
from trainer.story import NOTE_TAG

log = logging.getLogger(__name__)

KIND = "monitoring"
KIND_TAG, MODEL_TAG, VERSION_TAG = "driftloop.kind", "driftloop.model", "driftloop.version"
VERSION_RUN_TAG = "driftloop.monitoring_run"  # on the registered model version: the run's id
MAX_METRICS_PER_BATCH = 1000  # MLflow's limit on one log_batch call


@dataclass(frozen=True)
class Point:
    """One check's figures: ``step`` is the check's id (``driftloop status``), ``timestamp`` its
    time in epoch seconds, ``figures`` metric name → finite value."""

    step: int
    timestamp: float
    figures: Mapping[str, float]


def run_name(version: str) -> str:
    return f"monitor v{version}"


def note(version: str) -> str:
    """The run's Description: what it is and how to read its charts."""
    return "\n".join([
        f"### Checks of v{version} while it is champion", "",
        "One step per drift & performance check (step = the check's id, as `driftloop status` lists it; "
        "time = when the check ran): realised figures on the labelled rows, estimated figures on every "
        "scored row, drift shares and scores, and the rows behind them.",
        "Charts against *wall time* line this run up with the other versions' monitoring runs; the "
        "retrain runs in this experiment say why the champion changed.", "",
        "The run stays RUNNING while the version is champion and is FINISHED when another takes over."])


class MonitoringRuns:
    """The monitoring runs of one model's registered model (see the module docstring). Every
    method raises :class:`~monitor.errors.RegistryError` when MLflow cannot do it."""

    def __init__(self, cfg: DriftloopConfig):
        self.cfg = cfg
        self._registry: reg.Registry | None = None

    def _reg(self) -> reg.Registry:
        if self._registry is None:
            self._registry = reg.Registry(self.cfg)
        return self._registry

    def ready(self) -> None:
        """RegistryError unless MLflow can take writes now: asked first, so an outage costs the
        probe's timeout (``mlflow.timeout_seconds``), not MLflow's own retries."""
        reg.check_reachable(self.cfg)

    def open(self, version: str) -> str:
        """The run id of ``version``'s monitoring run, RUNNING: found by its tags, else created;
        every other monitoring run of the model still RUNNING is set FINISHED."""
        with reg.translating(self.cfg, f"opening the monitoring run of v{version}"):
            registry = self._reg()
            client = registry.client
            experiment = registry.experiment_id()
            runs = client.search_runs([experiment], max_results=1000, order_by=["attributes.start_time DESC"],
                                      filter_string=f"tags.`{KIND_TAG}` = '{KIND}' and "
                                                    f"tags.`{MODEL_TAG}` = '{self.cfg.model.name}'")
            mine = next((r for r in runs if r.data.tags.get(VERSION_TAG) == str(version)), None)
            for r in runs:
                if r is not mine and r.info.status == "RUNNING":
                    client.set_terminated(r.info.run_id, "FINISHED")
            if mine is None:
                run_id = client.create_run(experiment, run_name=run_name(version), tags={
                    KIND_TAG: KIND, MODEL_TAG: self.cfg.model.name, VERSION_TAG: str(version),
                    NOTE_TAG: note(version)}).info.run_id
                log.info("monitoring run %s opened for v%s", run_id, version)
            else:
                run_id = mine.info.run_id
                if mine.info.status != "RUNNING":  # champion again (a rollback): its steps go on
                    client.update_run(run_id, status="RUNNING")
        self._link(version, run_id)
        return run_id

    def _link(self, version: str, run_id: str) -> None:
        """The version's tag pointing at its run: a courtesy, so a version that cannot take tags
        (deleted from the registry by hand) does not stop its checks from being logged."""
        try:
            with reg.translating(self.cfg, f"tagging v{version} with its monitoring run"):
                self._reg().client.set_model_version_tag(self.cfg.registered_model_name, str(version),
                                                          VERSION_RUN_TAG, run_id)
        except Exception as exc:
            log.warning("monitoring run %s: could not tag v%s with it: %s", run_id, version, exc)

    def log(self, run_id: str, points: Sequence[Point]) -> None:
        """Each point's figures at its step and time, in as few ``log_batch`` calls as MLflow allows."""
        from mlflow.entities import Metric
        metrics = [Metric(key, float(value), int(p.timestamp * 1000), int(p.step))
                   for p in points for key, value in p.figures.items()]
        with reg.translating(self.cfg, "logging checks to the monitoring run"):
            client = self._reg().client
            for i in range(0, len(metrics), MAX_METRICS_PER_BATCH):
                client.log_batch(run_id, metrics=metrics[i:i + MAX_METRICS_PER_BATCH], synchronous=True)

    def finish(self, run_id: str) -> None:
        with reg.translating(self.cfg, "finishing a monitoring run"):
            self._reg().client.set_terminated(run_id, "FINISHED")
