"""``/metrics`` of a deployment of many models: the models' families merged, and the fleet's own.

Each model's daemon and ingestion collect into a registry of their own; :class:`FleetCollector`
collects them all and merges families of the same name into one (one ``# HELP``, every model's
samples), so the exposition stays valid however many models there are. With several models, a
family whose samples do not say which model they belong to (``driftloop_daemon_leader``,
``driftloop_daemon_store_up``) gains the ``model`` label. Single-model deployments expose exactly
what they always did.

The fleet's own families: ``driftloop_fleet_models`` (by state), ``driftloop_fleet_check_queue`` and
``driftloop_fleet_check_delay_seconds`` (a histogram per model of how late its checks started past
their due time: the scheduling delay of the shared pool), ``driftloop_fleet_retrain_slots``,
``driftloop_fleet_retrains_running``, ``driftloop_fleet_retrain_queue`` and
``driftloop_fleet_retrain_wait_seconds`` (how long granted retrains waited for a slot).
"""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Iterable, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.samples import Sample

if TYPE_CHECKING:
    from monitor.daemon.runtime.fleet import Fleet

log = logging.getLogger(__name__)

DELAY_BUCKETS = (0.1, 0.5, 1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 900.0, float("inf"))
WAIT_BUCKETS = (1.0, 10.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, float("inf"))


class _Histogram:
    """Cumulative bucket counts and a sum, fed observations in batches."""

    def __init__(self, buckets: tuple[float, ...]):
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.total = 0.0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1
        self.total += value

    def family_buckets(self) -> list[tuple[str, float]]:
        return [("+Inf" if b == float("inf") else repr(float(b)), float(c)) for b, c in zip(self.buckets, self.counts)]


def merge(per_model: Mapping[str, Iterable[Metric]], label_models: bool) -> list[Metric]:
    """Families of the same name merged across models; with ``label_models``, samples without a
    ``model`` label get their model's."""
    merged: dict[str, Metric] = {}
    for model, families in per_model.items():
        for family in families:
            into = merged.get(family.name)
            if into is None:
                into = Metric(family.name, family.documentation, family.type, family.unit)
                merged[family.name] = into
            for s in family.samples:
                if label_models and "model" not in s.labels:
                    s = Sample(s.name, {"model": model, **s.labels}, s.value, s.timestamp, s.exemplar)
                into.samples.append(s)
    return list(merged.values())


class FleetCollector:
    def __init__(self, fleet: Fleet):
        self._fleet = fleet
        self._lock = threading.Lock()
        self._delays: dict[str, _Histogram] = {}
        self._waits = _Histogram(WAIT_BUCKETS)

    def describe(self) -> Iterable[Metric]:
        return []  # dynamic families

    def collect(self) -> Iterable[Metric]:
        fleet = self._fleet
        registries = dict(fleet.registries)
        per_model: dict[str, list[Metric]] = {}
        for name, registry in registries.items():
            try:
                per_model[name] = list(registry.collect())
            except Exception:  # one model's broken collector must not empty the others' scrape
                log.exception("metrics of model %r could not be collected", name)
        yield from merge(per_model, label_models=len(registries) > 1)
        yield from self._own()

    def _own(self) -> Iterable[Metric]:
        fleet = self._fleet
        states = GaugeMetricFamily("driftloop_fleet_models", "Models this daemon hosts, by state (running; failed: "
                                   "its configuration or store could not be used, see GET /v1/models)",
                                   labels=["state"])
        states.add_metric(["running"], len(fleet.daemons))
        states.add_metric(["failed"], len(fleet.failed))
        yield states
        yield GaugeMetricFamily("driftloop_fleet_check_workers", "Threads that run the models' checks "
                                "(fleet.check_workers)", value=fleet.jobs.workers)
        yield GaugeMetricFamily("driftloop_fleet_check_queue", "Checks due that wait for a free check thread",
                                value=fleet.jobs.waiting())
        with self._lock:
            hosted = set(fleet.daemons)
            for model in list(self._delays):  # a model removed on reload takes its series with it
                if model not in hosted:
                    del self._delays[model]
            for model in hosted:  # every hosted model has its series from the first scrape
                self._delays.setdefault(model, _Histogram(DELAY_BUCKETS))
            for model, seen in list(fleet.jobs.delays.items()):
                if model not in hosted:
                    continue
                hist = self._delays.setdefault(model, _Histogram(DELAY_BUCKETS))
                while seen:
                    hist.observe(seen.pop(0))
            delay = HistogramMetricFamily("driftloop_fleet_check_delay_seconds", "How late a model's scheduled "
                                          "check started past its due time (waiting for a check thread)",
                                          labels=["model"])
            for model, hist in sorted(self._delays.items()):
                delay.add_metric([model], hist.family_buckets(), hist.total)
            yield delay
            skipped = CounterMetricFamily("driftloop_fleet_checks_skipped", "A model's scheduled checks that came "
                                          "due while its previous one still ran or waited for a thread (the pool "
                                          "cannot keep up with the models' intervals)", labels=["model"])
            for model in sorted(hosted):
                skipped.add_metric([model], float(fleet.jobs.skipped.get(model, 0)))
            yield skipped
            slots = fleet.slots
            while slots.waited:
                self._waits.observe(slots.waited.pop(0))
            running, queue = slots.snapshot()
            yield GaugeMetricFamily("driftloop_fleet_retrain_slots", "Retrains that may run at once across the "
                                    "models (fleet.max_concurrent_retrains)", value=slots.limit)
            yield GaugeMetricFamily("driftloop_fleet_retrains_running", "Retrain slots in use", value=len(running))
            yield GaugeMetricFamily("driftloop_fleet_retrain_queue", "Models waiting for a retrain slot",
                                    value=len(queue))
            wait = HistogramMetricFamily("driftloop_fleet_retrain_wait_seconds", "How long a retrain waited for a "
                                         "slot before it started")
            wait.add_metric([], self._waits.family_buckets(), self._waits.total)
            yield wait
