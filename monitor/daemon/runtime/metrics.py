"""The daemon's metrics: champion, incidents, retrains, check errors and the alert state.

Counters are derived from the store's tables on each scrape (``SELECT count(*) ... GROUP
BY``), so they survive restarts and agree with ``driftloop status``. A failing store does not
fail the scrape: ``driftloop_daemon_store_up`` drops to 0 and the store-derived families are
left out.
"""
from __future__ import annotations

import logging
from typing import Callable, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from monitor.config import RULE_METRIC_TASKS, RULE_METRICS
from monitor.daemon.decisions.kinds import Reason, State
from monitor.daemon.state import AlertInbox
from monitor.daemon.state.attempts import OUTCOMES
from monitor.daemon.runtime.checks import STATUSES
from monitor.daemon.runtime.controller import Controller
from monitor.daemon.state.incidents import REASONS
from monitor.tasks import TASKS, Task, task_of

log = logging.getLogger(__name__)

R = Reason
_NOT_METRICS = (R.ALERTMANAGER, R.SCHEDULE, R.MANUAL, R.REVIEW, R.IMPROVE)  # incident reasons of every task
# What the per-version gauge's help says of the model's headline figure (Task.primary_metric).
_FIGURE_HELP = {"accuracy": "Accuracy", "mae": "Mean absolute error"}


def alert_reasons(task: str | Task, rule_keys: Iterable[str] = ()) -> tuple[str, ...]:
    """The policy's reasons of a ``task`` model, so its series are its own metrics: the rule metrics
    the task has (``monitor.config.RULE_METRIC_TASKS``, in ``RULE_METRICS`` order) and drift; a metric
    the task judges per class (:attr:`Task.class_metrics`) only as a rule's key (``recall[night]``),
    from ``rule_keys`` (bounded by ``alerts.rules``)."""
    kind = task_of(task)
    reasons = tuple(R(m) for m in RULE_METRICS
                    if kind in RULE_METRIC_TASKS.get(m, TASKS) and m not in kind.class_metrics) + (R.DRIFT,)
    return reasons + tuple(k for k in rule_keys if k not in reasons)


def _gauge(name: str, doc: str, labels: list[str], samples: Iterable[tuple[list[str], float]]) -> GaugeMetricFamily:
    g = GaugeMetricFamily(name, doc, labels=labels)
    for values, v in samples:
        g.add_metric(values, v)
    return g


def _rule_families(m: str, readings: Iterable) -> Iterable[Metric]:
    """Per ``alerts.rules`` entry (one per metric: at most six series each), on checks with enough
    labels to judge; what the DriftloopModelMetricDrop rule alerts on."""
    readings = list(readings)
    yield _gauge("driftloop_model_rule_breached", "1 while the window breaches an alerts.rules entry (its metric "
                 "dropped by its drop or more vs the bar); absent while performance is not judged",
                 ["model", "metric"], [([m, r.metric], 1.0 if r.breached else 0.0) for r in readings])
    yield _gauge("driftloop_model_rule_drop", "Drop of an alerts.rules metric vs its bar (alerts.mode), on the "
                 "latest judged check", ["model", "metric"],
                 [([m, r.metric], r.drop) for r in readings if r.drop is not None])
    yield _gauge("driftloop_model_rule_threshold", "The drop at which an alerts.rules entry breaches",
                 ["model", "metric"], [([m, r.metric], r.threshold) for r in readings])


class DaemonCollector:
    def __init__(self, ctl: Controller, champion_version: Callable[[], str | None],
                 is_leader: Callable[[], bool] | None = None):
        self._ctl = ctl
        self._champion_version = champion_version
        self._is_leader = is_leader

    def describe(self) -> Iterable[Metric]:
        return []  # dynamic families; nothing to pre-register

    def collect(self) -> Iterable[Metric]:
        m = self._ctl.cfg.model.name
        yield from self._from_memory(m)
        try:
            families = list(self._from_store(m))
        except Exception as exc:  # the store is down: say so, keep the rest of the scrape
            log.warning("daemon metrics: store unavailable: %s", exc)
            yield _gauge("driftloop_daemon_store_up", "1 when the daemon can read its store", [], [([], 0)])
            return
        yield _gauge("driftloop_daemon_store_up", "1 when the daemon can read its store", [], [([], 1)])
        yield from families

    def _from_memory(self, m: str) -> Iterable[Metric]:
        if self._is_leader is not None:
            yield _gauge("driftloop_daemon_leader", "1 while this daemon is the leader of its store (runs checks, "
                         "the alert policy and retrains)", [], [([], 1.0 if self._is_leader() else 0.0)])
        version = self._champion_version()
        yield _gauge("driftloop_model_champion_info", "The model version behind alias champion",
                     ["model", "version"], [([m, version], 1)] if version else [])
        report = self._ctl.last_check
        status = report.outcome.status if report else None
        yield _gauge("driftloop_model_check_state", "1 for the state of the latest check (ok, no_champion, empty, "
                                                    "error)",
                     ["model", "state"], [([m, s], 1.0 if s == status else 0.0) for s in STATUSES] if status else [])
        verdict = report.verdict if report else None
        cfg = self._ctl.cfg
        if verdict is not None:
            firing = set(verdict.firing)
            reasons = alert_reasons(cfg.model.task, (r.key for r in cfg.alerts.rules if r.class_name))
            yield _gauge("driftloop_model_alert_firing",
                         "1 while the daemon's alert policy sees a sustained breach, per reason",
                         ["model", "reason"], [([m, r], 1.0 if r in firing else 0.0) for r in reasons])
            yield from _rule_families(m, verdict.rules)
            if verdict.segment_breaches or self._ctl.cfg.model.segments:
                breached = {b.segment for b in verdict.segment_breaches}
                shown = [s.label for s in (getattr(self._ctl.last_result, "segments", None) or [])]
                yield _gauge("driftloop_model_segment_breached",
                             "1 while a judged segment value's accuracy interval lies accuracy_drop or more below "
                             "its bar (model.segments; the DriftloopModelSegmentDrop alert)",
                             ["model", "segment"], [([m, label], 1.0 if label in breached else 0.0) for label in shown])
        yield _gauge("driftloop_retrain_running", "1 while a retrain worker runs", ["model"],
                     [([m], 1.0 if self._ctl.supervisor.busy else 0.0)])
        # Per scoring version in the latest window (at most MAX_VERSIONS_REPORTED: bounded cardinality).
        versions = self._ctl.last_versions or {}
        yield _gauge("driftloop_model_version_rows",
                     "Predictions in the latest window, by the version that scored them",
                     ["model", "version"], [([m, v], float(d["rows"])) for v, d in versions.items()])
        figure = task_of(cfg.model).primary_metric  # what checks.version_summary reports per version
        yield _gauge(f"driftloop_model_version_{figure}",
                     f"{_FIGURE_HELP[figure]} of the latest window's labelled rows, by the version that scored them",
                     ["model", "version"],
                     [([m, v], d[figure]) for v, d in versions.items() if d.get(figure) is not None])

    def _from_store(self, m: str) -> Iterable[Metric]:
        ctl = self._ctl
        last_label = ctl.store.last_label_time()
        if last_label is not None:
            yield _gauge("driftloop_model_last_label_timestamp_seconds", "When the latest label arrived",
                         ["model"], [([m], last_label.timestamp())])
        if ctl.store.engine.dialect.name == "postgresql":  # followers hold alerts only on a shared store
            held, age = AlertInbox(ctl.store.engine, m, ctl.clock).backlog()
            yield _gauge("driftloop_alert_inbox_held", "Alertmanager deliveries a follower holds in the store for "
                         "this model's leader, not yet acted upon", ["model"], [([m], held)])
            yield _gauge("driftloop_alert_inbox_oldest_age_seconds", "How long the oldest held delivery has waited "
                         "for the model's leader (0 when none)", ["model"], [([m], age)])
        errors = CounterMetricFamily("driftloop_model_check_errors", "Drift/performance checks that failed",
                                     labels=["model"])
        errors.add_metric([m], ctl.checklog.error_total() + ctl.unrecorded_errors)
        yield errors
        yield _gauge("driftloop_incidents_open", "Incidents not yet resolved", ["model"],
                     [([m], ctl.incidents.count_open())])
        open_now = ctl.incidents.open_incidents()
        yield _gauge("driftloop_incident_escalated",
                     "1 while an open incident stayed unrecovered after alerts.max_attempts retrains in a row",
                     ["model"], [([m], 1.0 if any(i.escalated for i in open_now) else 0.0)])
        yield _gauge("driftloop_incident_suspected",
                     "1 while an open incident is suspected: an estimated drop (from the scores alone) that labels "
                     "have not yet confirmed or cleared", ["model"],
                     [([m], 1.0 if any(i.state == State.SUSPECTED for i in open_now) else 0.0)])
        yield _gauge("driftloop_incident_waiting",
                     "1 while an open incident waits for labelled rows after the change point before retraining",
                     ["model"], [([m], 1.0 if any(i.state == State.WAITING for i in open_now) else 0.0)])
        level = ctl.levels.read() or {}
        for key, metric in (("reference_accuracy", "driftloop_model_reference_accuracy"),
                            ("reference_roc_auc", "driftloop_model_reference_roc_auc")):
            if key in level:
                yield _gauge(metric, "The reference level of good performance that recovery is judged against "
                             "(the higher of it and the champion's baseline is the bar)", ["model"],
                             [([m], level[key])])
        if "reference_mae" in level:
            yield _gauge("driftloop_model_reference_mae", "Regression: the reference level of the MAE that recovery is "
                         "judged against (the lowest MAE the loop has reached; the lower of it and the champion's "
                         "baseline MAE is the bar)", ["model"], [([m], level["reference_mae"])])
        by_reason = ctl.incidents.totals_by_reason()
        incidents = CounterMetricFamily("driftloop_incidents", "Incidents opened, by reason",
                                        labels=["model", "reason"])
        task_reasons = alert_reasons(ctl.cfg.model.task) + _NOT_METRICS
        for reason in [r for r in REASONS
                       if r in task_reasons or by_reason.get(r)] + sorted(set(by_reason) - set(REASONS)):
            incidents.add_metric([m, reason], by_reason.get(reason, 0))
        yield incidents
        watch = getattr(ctl, "estimation", None)
        if watch is not None:
            recal = CounterMetricFamily("driftloop_estimation_recalibrations",
                                        "Recalibrations of the label-free estimate on the champion's labelled rows, "
                                        "after its realised accuracy (regression: MAE) fell outside the estimate's "
                                        "band for drift.estimation_recalibrate_windows windows in a row",
                                        labels=["model"])
            recal.add_metric([m], watch.recalibrations)
            yield recal
            yield _gauge("driftloop_estimate_outside_band_checks", "Labelled checks in a row whose realised accuracy "
                         "(regression: MAE) fell outside the label-free estimate's band; at "
                         "drift.estimation_recalibrate_windows the estimate is recalibrated",
                         ["model"], [([m], float(watch.streak))])
        by_outcome = ctl.attempts.totals_by_outcome()
        retrains = CounterMetricFamily("driftloop_retrains", "Retrains finished, by outcome",
                                       labels=["model", "outcome"])
        for outcome in OUTCOMES:
            retrains.add_metric([m, outcome], by_outcome.get(outcome, 0))
        yield retrains
        last_at = ctl.attempts.last_with_status()
        yield _gauge("driftloop_retrain_last_outcome_timestamp_seconds", "When a retrain last ended with each outcome",
                     ["model", "outcome"], [([m, o], t) for o, t in sorted(last_at.items())])
        last = ctl.attempts.last_finished()
        if last is not None and last.duration_seconds is not None:
            yield _gauge("driftloop_retrain_last_duration_seconds", "Duration of the latest finished retrain",
                         ["model"], [([m], last.duration_seconds)])
        done = next((a for a in ctl.attempts.recent(20) if a.samples_per_second), None)
        if done is not None:
            yield _gauge("driftloop_training_samples_per_second", "Training throughput of the latest retrain",
                         ["model"], [([m], float(done.samples_per_second or 0.0))])  # truthy: found so
