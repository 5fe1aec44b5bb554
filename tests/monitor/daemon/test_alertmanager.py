"""Alertmanager's webhook payload: parsing, and a real ``prometheus-alertmanager`` notifying a
real daemon over HTTP, which opens an incident and retrains."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import httpx
import pytest
from pydantic import ValidationError

from monitor.daemon.runtime.alertmanager import WebhookPayload, select_alerts
from tests.support.prometheus import start_alertmanager
from tests.support.waiting import wait_until

# The format of https://prometheus.io/docs/alerting/latest/configuration/#webhook_config, filled in
# as Alertmanager 0.25 sends it (a firing alert's endsAt is the zero time).
DOCS_PAYLOAD = {
    "version": "4",
    "groupKey": '{}/{component="model"}:{alertname="DriftloopModelAccuracyDrop", model="demo"}',
    "truncatedAlerts": 0,
    "status": "firing",
    "receiver": "driftloop",
    "groupLabels": {"alertname": "DriftloopModelAccuracyDrop", "model": "demo"},
    "commonLabels": {"alertname": "DriftloopModelAccuracyDrop", "component": "model", "model": "demo"},
    "commonAnnotations": {"summary": "Accuracy of model demo is 4.2% below its baseline"},
    "externalURL": "http://alertmanager:9093",
    "alerts": [
        {"status": "firing",
         "labels": {"alertname": "DriftloopModelAccuracyDrop", "component": "model", "model": "demo",
                    "reason": "accuracy", "severity": "warning", "team": "ml"},
         "annotations": {"summary": "Accuracy of model demo is 4.2% below its baseline"},
         "startsAt": "2026-11-30T01:02:03.123Z", "endsAt": "0001-01-01T00:00:00Z",
         "generatorURL": "http://prometheus:9090/graph?g0.expr=...", "fingerprint": "a1b2c3d4e5f60718"},
        {"status": "resolved",
         "labels": {"alertname": "DriftloopGpuHot", "component": "gpu", "gpu": "0"},
         "annotations": {}, "startsAt": "2026-11-30T00:00:00Z", "endsAt": "2026-11-30T00:30:00Z",
         "generatorURL": "", "fingerprint": "0011223344556677"},
        {"status": "firing",
         "labels": {"alertname": "DriftloopModelAccuracyDrop", "component": "model", "model": "other"},
         "annotations": {}, "startsAt": "2026-11-30T01:02:03Z", "endsAt": "0001-01-01T00:00:00Z"},
    ],
}


def test_docs_payload_parses_and_only_our_model_alerts_count():
    payload = WebhookPayload.model_validate(DOCS_PAYLOAD)
    assert payload.alerts[0].starts_at == datetime(2026, 11, 30, 1, 2, 3, 123000, tzinfo=timezone.utc)
    sel = select_alerts(payload, {"component": "model"}, "demo")
    assert [a.fingerprint for a in sel.firing] == ["a1b2c3d4e5f60718"]
    assert sel.resolved == [] and len(sel.ignored) == 2  # a GPU alert, and another model's
    assert sel.firing[0].summary() == "DriftloopModelAccuracyDrop: Accuracy of model demo is 4.2% below its baseline"


@pytest.mark.parametrize("change,field", [
    ({"version": "3"}, "version"),
    ({"status": "burning"}, "status"),
    ({"alerts": None}, "alerts"),
    ({"alerts": [{"status": "firing"}]}, "alerts.0.labels"),
    ({"alerts": [{"status": "firing", "labels": {"a": 1}}]}, "alerts.0.labels.a"),
])
def test_malformed_payloads_name_the_field(change, field):
    with pytest.raises(ValidationError) as err:
        WebhookPayload.model_validate({**DOCS_PAYLOAD, **change})
    assert field in {".".join(str(p) for p in e["loc"]) for e in err.value.errors()}


@pytest.fixture
def alertmanager(tmp_path):
    started = []

    def start(webhook_url: str, token: str) -> str:
        config = {
            "route": {"receiver": "driftloop", "group_by": ["alertname", "model"], "group_wait": "0s",
                      "group_interval": "1s", "repeat_interval": "1h"},
            "receivers": [{"name": "driftloop", "webhook_configs": [{
                "url": webhook_url, "send_resolved": True,
                "http_config": {"authorization": {"type": "Bearer", "credentials": token}}}]}],
        }
        started.append(start_alertmanager(tmp_path / "am", config))
        return started[-1].url
    yield start
    for am in started:
        am.stop()


def post_alert(am_url: str, ends_in: float) -> None:
    now = datetime.now(timezone.utc)
    alert = {"labels": {"alertname": "DriftloopModelAccuracyDrop", "component": "model", "model": "demo",
                        "reason": "accuracy", "severity": "warning"},
             "annotations": {"summary": "accuracy 4 points below baseline"},
             "startsAt": (now - timedelta(minutes=10)).isoformat(),
             "endsAt": (now + timedelta(seconds=ends_in)).isoformat()}
    r = httpx.post(f"{am_url}/api/v2/alerts", json=[alert], timeout=10)
    assert r.status_code == 200, r.text


def test_real_alertmanager_triggers_a_retrain_and_its_resolution_resolves(alertmanager, live_daemon):
    daemon, url = live_daemon(token="am-token-0123")
    am = alertmanager(f"{url}/v1/alerts", "am-token-0123")
    post_alert(am, ends_in=3600)
    ctl = daemon.controller
    incident = wait_until(ctl.incidents.recent, 60, 0.1, "no webhook arrived")[0]
    assert incident.reason == "alertmanager" and incident.trigger == "alert"
    # The opening says which alert (the detail moves on with the state: it may be retraining already).
    opened = [e for e in ctl.incidents.events(incident.id) if e["kind"] == "opened"]
    assert "DriftloopModelAccuracyDrop" in opened[0]["message"], opened
    # The webhook's answer may come before the retrain is launched: wait for its attempt, then its end.
    wait_until(lambda: ctl.attempts.for_incident(incident.id), 60, 0.1, "no retrain started")
    assert daemon.wait_for_retrain(60)
    attempts = ctl.attempts.for_incident(incident.id)
    assert [a.status for a in attempts] == ["promoted"] and attempts[0].trigger == "alert"
    post_alert(am, ends_in=-1)  # the rule stopped firing: Alertmanager sends "resolved"
    wait_until(lambda: ctl.incidents.get(incident.id).state == "resolved", 60, 0.1,
               lambda: str(ctl.incidents.events(incident.id)))
    kinds = [e["kind"] for e in ctl.incidents.events(incident.id)]
    assert kinds[:4] == ["opened", "alertmanager_firing", "retraining", "promoted"]
    assert "alertmanager_resolved" in kinds and kinds[-1] == "resolved"
