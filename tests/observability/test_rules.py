"""The alert rules: promtool's checks and unit tests, and what every alert must carry."""
from __future__ import annotations

import re

import pytest
import yaml

from monitor.config import AlertsConfig, DriftConfig
from scripts import docs_gen
from tests.observability.conftest import run
from tests.observability.promql import (REPO, RULE_FILES, RULE_TESTS, contract_metrics, keeps_model, load_rules,
                                         metric_names, per_model_metrics)

ALERTS = [r for r in load_rules() if "alert" in r]
SEVERITIES = {"critical", "warning", "info"}
TEAMS = {"ml", "infra"}
COMPONENTS = {"model", "pipeline", "ingest", "gpu", "service"}
# Incident reasons the daemon knows for alert-driven incidents (docs/CONTRACTS.md, driftloop_incidents_total).
MODEL_REASONS = {"accuracy", "roc_auc", "mae", "drift"}


def _by_name(name: str) -> dict:
    return next(r for r in ALERTS if r["alert"] == name)


def _flat(expr: str) -> str:
    return " ".join(expr.split())


def test_rule_files_exist():
    assert RULE_FILES and RULE_TESTS
    assert len(ALERTS) >= 15


def test_promtool_check_rules(promtool):
    proc = run([promtool, "check", "rules", *map(str, RULE_FILES)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = [int(n) for n in re.findall(r"SUCCESS: (\d+) rules found", proc.stdout)]
    assert len(found) == len(RULE_FILES) and sum(found) == len(load_rules()), proc.stdout


def test_promtool_unit_tests_pass(promtool):
    # Run from another folder: the tests' rule_files paths must resolve against the test files.
    proc = run([promtool, "test", "rules", *map(str, RULE_TESTS)], cwd=REPO / "docs")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("SUCCESS") == len(RULE_TESTS), proc.stdout


def test_promtool_unit_tests_can_fail(promtool, tmp_path):
    """A broken threshold must make the unit tests fail (they test something)."""
    rules = (REPO / "rules" / "driftloop.rules.yml").read_text()
    broken = rules.replace("driftloop_gpu_temperature_celsius >= 85", "driftloop_gpu_temperature_celsius >= 95")
    assert broken != rules
    (tmp_path / "driftloop.rules.yml").write_text(broken)
    (tmp_path / "tests").mkdir()
    test_file = tmp_path / "tests" / "gpu.test.yml"
    test_file.write_text((REPO / "rules" / "tests" / "gpu.test.yml").read_text())
    proc = run([promtool, "test", "rules", str(test_file)])
    assert proc.returncode != 0
    assert "DriftloopGpuTooHot" in proc.stdout + proc.stderr


@pytest.mark.parametrize("alert", ALERTS, ids=[a["alert"] for a in ALERTS])
def test_alert_carries_routing_labels_and_annotations(alert):
    labels, notes = alert.get("labels", {}), alert.get("annotations", {})
    assert labels.get("severity") in SEVERITIES
    assert labels.get("team") in TEAMS
    assert labels.get("component") in COMPONENTS
    assert notes.get("summary") and notes.get("description")
    # The docs site's runbook page (tests/docs checks that it resolves on the built site).
    assert notes.get("runbook_url") == docs_gen.runbook_url(alert["alert"])
    assert alert["alert"].startswith("Driftloop")


def test_every_alert_has_a_runbook_page_in_the_docs():
    missing = []
    for a in ALERTS:
        page = REPO / "docs" / docs_gen.runbook_page(a["alert"])
        if not page.is_file() or not page.read_text().startswith(f"# {a['alert']}\n"):
            missing.append(a["alert"])
    assert not missing, f"no runbook page (docs/runbooks/<alert>.md headed '# <alert>') for {missing}"


def test_every_alert_has_a_firing_and_a_quiet_unit_test():
    fires, quiet = set(), set()
    for path in RULE_TESTS:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                (fires if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {a["alert"] for a in ALERTS}
    assert names - fires == set(), "alerts never tested firing"
    assert names - quiet == set(), "alerts never tested staying quiet"


def test_model_thresholds_are_the_daemon_defaults():
    alerts, drift = AlertsConfig(), DriftConfig()
    acc = _flat(_by_name("DriftloopModelAccuracyDrop")["expr"])
    auc = _flat(_by_name("DriftloopModelRocAucDrop")["expr"])
    assert f"(driftloop_model_baseline_accuracy - driftloop_model_accuracy) >= {alerts.accuracy_drop}" in acc
    assert f"(driftloop_model_baseline_roc_auc - driftloop_model_roc_auc) >= {alerts.auc_drop}" in auc
    mae = _flat(_by_name("DriftloopModelMaeRise")["expr"])
    assert ("(driftloop_model_mae - driftloop_model_baseline_mae) / driftloop_model_baseline_mae >= "
            f"{alerts.mae_rise}") in mae
    for expr in (acc, auc, mae):  # the labelled-rows guard is the need the daemon resolved, not a copy
        assert ("and on (job, instance, model) driftloop_model_labelled_rows >= on (job, instance, model) "
                "driftloop_model_min_labels") in expr
    assert _flat(_by_name("DriftloopDataDriftHigh")["expr"]) == ("driftloop_model_drift_share_ratio >= "
                                                                 f"{drift.drift_share}")
    # The check interval: stale after three missed runs.
    assert f"> {int(3 * drift.interval_seconds)}" in _by_name("DriftloopDriftCheckStale")["expr"]
    # A retrain is stuck only once the daemon's own timeout should have ended it.
    stuck_for = _by_name("DriftloopRetrainStuck")["for"]
    assert stuck_for.endswith("m") and int(stuck_for[:-1]) * 60 > alerts.retrain_timeout_seconds


def test_model_alerts_reach_the_daemon():
    """Alerts Alertmanager sends to /v1/alerts carry the labels the daemon selects on
    (alerts.webhook_match) and a reason it knows."""
    match = AlertsConfig().webhook_match
    model_alerts = [a for a in ALERTS if a["labels"]["component"] == "model"]
    assert {a["alert"] for a in model_alerts} >= {"DriftloopModelAccuracyDrop", "DriftloopModelRocAucDrop",
                                                   "DriftloopDataDriftHigh"}
    for a in model_alerts:
        assert all(a["labels"].get(k) == v for k, v in match.items()), a["alert"]
        assert a["labels"].get("reason") in MODEL_REASONS, a["alert"]
    others = [a for a in ALERTS if a["labels"]["component"] != "model"]
    assert not [a["alert"] for a in others if all(a["labels"].get(k) == v for k, v in match.items())]


def test_rules_use_only_contract_metrics():
    known = contract_metrics()
    unknown = {a["alert"]: metric_names(a["expr"]) - known for a in ALERTS}
    assert not {k: v for k, v in unknown.items() if v}


def test_per_model_alerts_say_which_model():
    """A daemon hosts many models: an alert on per-model series leads with its model, and its
    description names it (the commands it shows take `--model` with it)."""
    per_model = [a for a in ALERTS if metric_names(a["expr"]) & per_model_metrics() and keeps_model(a["expr"])]
    assert {a["alert"] for a in per_model} >= {"DriftloopModelAccuracyDrop", "DriftloopRetrainFailed",
                                               "DriftloopIngestRejections", "DriftloopModelSegmentDrop"}
    for a in per_model:
        notes = a["annotations"]
        assert notes["summary"].startswith("Model {{ $labels.model }}: "), a["alert"]
        assert "{{ $labels.model }}" in notes["description"], a["alert"]
        for command in re.findall(r"`(driftloop [a-z]+[^`]*)`", notes["description"]):
            assert "--model {{ $labels.model }}" in command, (a["alert"], command)
    others = {a["alert"] for a in ALERTS} - {a["alert"] for a in per_model}
    assert {"DriftloopStoreDown", "DriftloopDown", "DriftloopGpuTooHot"} <= others
