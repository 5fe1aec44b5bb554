"""The metric tables of docs/CONTRACTS.md (the docs site's Metrics page) are what a live daemon serves:
every `driftloop_*` series on /metrics is documented, and every documented name is served."""
from __future__ import annotations

import time

import httpx
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor.drift import ModelMetricsCollector
from tests.monitor.drift.task_frames import filled_result
from tests.observability.promql import contract_metrics

# Born at their first event, so a fresh daemon cannot show them (docs/CONTRACTS.md says why for XID).
BORN_ON_EVENT = {"driftloop_gpu_xid_errors_total"}
# Served only for GPUs in MIG mode, which simulated GPUs are not (tests/monitor/gpu/test_slow_readings.py
# covers them on the fake backend).
MIG_ONLY = {"driftloop_gpu_mig_info"}
# Served only while a check's labels are chosen by the score (tests/monitor/daemon/test_label_selection.py
# reads it off a daemon whose labels are); the live daemon below labels every row.
CHOSEN_ONLY = {"driftloop_model_label_selection_shift"}
# Served only on a shared PostgreSQL store, where followers hold alerts for the leader
# (tests/monitor/daemon/test_alert_inbox.py reads them off a follower); the live daemon below is on SQLite.
POSTGRES_ONLY = {"driftloop_alert_inbox_held", "driftloop_alert_inbox_oldest_age_seconds"}


def served_names(text: str) -> set[str]:
    return {s.name for fam in text_string_to_metric_families(text) for s in fam.samples
            if s.name.startswith("driftloop_") and not s.name.endswith("_created")}


def task_served(task: str) -> set[str]:
    """What the model collector serves for a check of ``task`` with every figure of its task set."""
    registry = CollectorRegistry()
    registry.register(ModelMetricsCollector("demo", lambda: filled_result(task)))
    return served_names(generate_latest(registry).decode())


# The figures of multiclass and regression models, which the live (binary) daemon below cannot serve;
# the daemon's own regression series (test_tasks_daemon.py reads them off a regression daemon).
DAEMON_REGRESSION = {"driftloop_model_reference_mae", "driftloop_model_version_mae"}
TASK_ONLY = (task_served("multiclass") | task_served("regression")) - task_served("binary") | DAEMON_REGRESSION


def test_live_metrics_are_the_documented_ones(live_daemon, tmp_path):
    constraints = tmp_path / "constraints.json"  # x0 at most -100: every row breaks it (the rest: extra columns)
    constraints.write_text('{"version": 1, "columns": {"x0": {"inferred_type": "fractional", "max": -100}}}')
    daemon, url = live_daemon(token="t0k-0123456789", overrides={
        "model": {"segments": ["region"]},                # per-segment figures
        "alerts": {"rules": [{"metric": "recall", "drop": 0.5}]},  # the alerts.rules gauges
        "drift": {"segment_min_labels": 30,               # 300 rows: a segment's drift share needs 30
                  "constraints": str(constraints),        # the constraint violation gauges
                  "descriptors": {"text": "input_uri"}},  # the descriptor row gauges (skipped: no input_uri)
        "server": {"gpu_metrics": True},
        "exporter": {"simulate": 1, "process_metrics": True, "pcie_throughput": True, "xid_events": True,
                     "sampler_interval_seconds": 0.05}})
    daemon.run_check_now()                               # model figures
    assert httpx.post(f"{url}/v1/retrain", headers={"Authorization": "Bearer t0k-0123456789"},
                      timeout=30).status_code == 202
    assert daemon.wait_for_retrain(120)                  # retrain figures
    httpx.post(f"{url}/v1/labels", json=[{"id": "x", "label": 1}], headers={"Authorization": "Bearer t0k-0123456789"},
               timeout=30)                               # an ingested batch: the latency histogram
    documented = contract_metrics()
    documented -= {n for n in documented if n + "_bucket" in documented}  # a histogram is served as its series
    # The simulated GPU runs a process only while busy (its load follows a sine wave of 240-600 s): a
    # scrape in the wave's trough (up to about 40 s, always idle) has no process series. The union of
    # scrapes until then has every series.
    served: set[str] = set()
    deadline = time.monotonic() + 60
    while True:
        served |= served_names(httpx.get(f"{url}/metrics", timeout=30).text)
        if not documented - served - BORN_ON_EVENT - MIG_ONLY - TASK_ONLY - CHOSEN_ONLY or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert served - documented == set(), "served but not in docs/CONTRACTS.md's metric tables"
    assert documented - served - BORN_ON_EVENT - MIG_ONLY - TASK_ONLY - CHOSEN_ONLY - POSTGRES_ONLY == set(), \
        "documented but not served by a live daemon"


def test_the_figures_of_every_task_are_documented():
    assert {"driftloop_model_mae", "driftloop_model_class_recall", "driftloop_model_label_drift_score"} <= TASK_ONLY
    assert TASK_ONLY - contract_metrics() == set(), "served for a multiclass or regression model, not documented"


def test_the_comparison_can_fail():
    text = "# TYPE driftloop_made_up gauge\ndriftloop_made_up 1\n"
    assert served_names(text) - contract_metrics() == {"driftloop_made_up"}


# docs/CONTRACTS.md: driftloop_incidents_total has a series from the first scrape for each of these, beside
# the task's alert reasons (those of driftloop_model_alert_firing).
REQUESTED_AND_EXTERNAL = {"alertmanager", "schedule", "manual", "review", "improve"}


def test_incidents_total_starts_at_zero_for_every_documented_reason(make_daemon):
    from monitor.daemon.runtime.metrics import alert_reasons

    daemon, _ = make_daemon(with_champion=False)
    totals = {s.labels["reason"]: s.value
              for fam in text_string_to_metric_families(generate_latest(daemon.registry).decode())
              for s in fam.samples if s.name == "driftloop_incidents_total"}
    expected = set(alert_reasons(daemon.cfg.model.task)) | REQUESTED_AND_EXTERNAL
    assert set(totals) == expected
    assert set(totals.values()) == {0.0}
