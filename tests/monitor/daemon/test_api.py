"""The daemon's endpoints over real HTTP: /v1/alerts, /v1/retrain, /v1/status."""
from __future__ import annotations

import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from monitor.daemon.decisions.kinds import Outcome
from monitor.daemon.runtime.views import HIDDEN, public_status
from tests.monitor.daemon.test_alertmanager import DOCS_PAYLOAD

AUTH = {"Authorization": "Bearer t0ken-0123456"}


def test_alerts_endpoint_validates_and_needs_the_token(live_daemon):
    daemon, url = live_daemon(token="t0ken-0123456")
    r = httpx.post(f"{url}/v1/alerts", json=DOCS_PAYLOAD, timeout=10)
    assert r.status_code == 401 and "Bearer" in r.json()["error"]  # the same error shape as ingestion's
    assert r.headers["www-authenticate"].startswith("Bearer")
    r = httpx.get(f"{url}/v1/nope", timeout=10)
    assert r.status_code == 404 and r.json() == {"error": "Not Found"}
    bad = {**DOCS_PAYLOAD, "version": "3", "alerts": [{"status": "firing"}]}
    r = httpx.post(f"{url}/v1/alerts", json=bad, headers=AUTH, timeout=10)
    assert r.status_code == 422
    assert r.json()["error"].startswith("not a valid Alertmanager webhook payload (version 4)")
    assert {"version", "alerts.0.labels"} <= {e["field"] for e in r.json()["errors"]}
    r = httpx.post(f"{url}/v1/alerts", content=b"{not json", headers={**AUTH, "content-type": "application/json"},
                   timeout=10)
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]
    assert daemon.controller.incidents.recent() == []  # nothing was opened by the bad requests


def test_alert_for_another_component_is_ignored(live_daemon):
    daemon, url = live_daemon()
    payload = {**DOCS_PAYLOAD, "alerts": [DOCS_PAYLOAD["alerts"][1]]}
    r = httpx.post(f"{url}/v1/alerts", json=payload, timeout=10)
    assert r.status_code == 200 and r.json()["ignored"] == 1 and r.json()["incident"] is None


def test_manual_retrain_is_single_flight(live_daemon):
    daemon, url = live_daemon(token="t0ken-0123456", behaviour="hang")
    r = httpx.post(f"{url}/v1/retrain", json={"reason": "new labels from the audit"}, headers=AUTH, timeout=30)
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["incident"]["reason"] == "manual" and body["attempt_id"].startswith("att-")
    r = httpx.post(f"{url}/v1/retrain", headers=AUTH, timeout=30)
    assert r.status_code == 409 and "already running" in r.text
    r = httpx.post(f"{url}/v1/retrain", json={"reason": "x", "force": True}, headers=AUTH, timeout=30)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "force"  # a typo is not ignored
    status = httpx.get(f"{url}/v1/status", timeout=10).json()
    assert status["retrain_running"]["id"] == body["attempt_id"]
    assert status["open_incidents"][0]["state"] == "retraining"
    metrics = httpx.get(f"{url}/metrics", timeout=10).text
    assert 'driftloop_retrain_running{model="demo"} 1.0' in metrics
    assert 'driftloop_incidents_total{model="demo",reason="manual"} 1.0' in metrics


def test_manual_retrain_without_enough_labels_is_refused_with_the_reason(live_daemon):
    daemon, url = live_daemon(overrides={"training": {"min_rows": 1000}})  # the store holds 300 labelled rows
    r = httpx.post(f"{url}/v1/retrain", timeout=30)
    assert r.status_code == 409
    assert "300 labelled rows < training.min_rows=1000" in r.json()["error"]
    assert r.json()["incident"]["state"] == "resolved"  # the request is on record, and closed
    assert "nothing waits" in r.json()["error"] and "is resolved" in r.json()["error"]  # not "resumes"
    assert daemon.controller.attempts.recent() == []
    assert httpx.post(f"{url}/v1/retrain", timeout=30).status_code == 409
    assert len(httpx.get(f"{url}/v1/status", timeout=10).json()["recent_incidents"]) == 2
    assert len(httpx.get(f"{url}/v1/status", params={"limit": 1}, timeout=10).json()["recent_incidents"]) == 1
    r = httpx.get(f"{url}/v1/status", params={"limit": 0}, timeout=10)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "limit"


def test_manual_retrain_without_a_champion_is_refused_up_front(live_daemon):
    # A retrain warm-starts the champion: without one it could only fail (it was a 202, then a failed
    # attempt and an incident). The answer says what to do, and nothing is opened or started.
    daemon, url = live_daemon(with_champion=False)
    r = httpx.post(f"{url}/v1/retrain", json={"reason": "audit"}, timeout=30)
    assert r.status_code == 409, r.text
    assert r.json()["error"].startswith("no champion: the registry has no champion to retrain")
    assert "`driftloop train`" in r.json()["error"] and "`champion` alias" in r.json()["error"]
    assert daemon.controller.incidents.recent() == [] and daemon.controller.attempts.recent() == []


def test_a_restarted_daemon_serves_the_last_checked_champion_before_its_first_check(make_daemon):
    # Before, a restarted daemon knew its champion only at its first check (up to an interval later):
    # rows sent meanwhile without model_version were stored with none, and champion_info was absent.
    daemon, traffic = make_daemon()
    daemon.start(scheduler=False)
    traffic.send(300, 5)
    assert daemon.run_check_now().outcome.champion_version == "1"
    daemon.stop(grace=2)
    again, _ = make_daemon()  # the same home and store: a restart
    assert again.served_version() is None
    again.start(scheduler=False)
    assert again.served_version() == "1" and again.controller.checklog.recent(1)[0]["id"] == 1  # no new check
    again.store.add_predictions([{"id": "fresh-1", "features": {f"x{k}": 0.1 for k in range(8)}
                                  | {"region": "eu", "device": "ios"}, "score": 0.7}],
                                model_version=again.served_version())
    window = again.store.window()
    assert window.loc[window["id"] == "fresh-1", "model_version"].tolist() == ["1"]


def test_openapi_documents_the_daemon_endpoints(live_daemon):
    _, url = live_daemon()
    spec = httpx.get(f"{url}/openapi.json", timeout=10).json()
    assert {"/v1/alerts", "/v1/retrain", "/v1/status"} <= set(spec["paths"])
    body = spec["paths"]["/v1/alerts"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert "alerts" in body["properties"] and "startsAt" in str(body)


def test_status_without_the_token_gives_kinds_and_counts_never_paths(live_daemon):
    daemon, url = live_daemon(token="t0ken-0123456")
    home, c = str(daemon.cfg.home), daemon.controller
    report = f"{home}/reports/drift.html"
    incident = c.incidents.open("manual", "manual", f"drift report at {report}", report_paths=[report])
    attempt = c.attempts.begin(incident.id, "manual")
    c.attempts.finish(attempt.id, Outcome.FAILED, error="input_uri /etc/passwd: not an image")

    anyone = httpx.get(f"{url}/v1/status", timeout=10)
    assert anyone.status_code == 200
    assert home not in anyone.text and "/etc/passwd" not in anyone.text, anyone.text
    body = anyone.json()
    failed = next(a for a in body["recent_retrains"] if a["id"] == attempt.id)
    assert failed["status"] == Outcome.FAILED and failed["error"] == HIDDEN  # the kind stays; the text goes
    opened = next(i for i in body["recent_incidents"] if i["id"] == incident.id)
    assert opened["report_paths"] == [HIDDEN] and opened["detail"] == HIDDEN and opened["attempts"] >= 0
    assert body["hidden"] >= 3

    owner = httpx.get(f"{url}/v1/status", headers=AUTH, timeout=10).json()
    assert "hidden" not in owner
    failed = next(a for a in owner["recent_retrains"] if a["id"] == attempt.id)
    assert failed["error"] == "input_uri /etc/passwd: not an image"


def test_status_needs_the_token_with_protect_reads(live_daemon):
    daemon, url = live_daemon(token="t0ken-0123456", overrides={"server": {"protect_reads": True}})
    r = httpx.get(f"{url}/v1/status", timeout=10)
    assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
    assert httpx.get(f"{url}/v1/status", headers=AUTH, timeout=10).status_code == 200
    assert httpx.get(f"{url}/readyz", timeout=10).status_code in (200, 503)  # a probe: never 401
    assert httpx.get(f"{url}/runbooks/", timeout=10).status_code == 200  # opened from an alert, in a browser


def test_public_status_hides_texts_paths_and_uris_and_keeps_the_rest():
    status = {"model": "demo", "champion": {"version": "3", "error": "MLflow tracking server down"},
              "review": {"last": "champion review: scored against sqlite:///srv/mlflow.db"},
              "recent_retrains": [{"id": "att-1", "status": "failed", "reasons": ["mae 0.3 > 0.2"], "rows": 300,
                                   "error": None}],
              "open_incidents": [{"id": "inc-1", "report_paths": ["/a.html", "/b.html"], "detail": ""}],
              "note": "see ~/driftloop/reports", "ratio": "1/2 of the window"}
    public = public_status(status)
    assert public["champion"] == {"version": "3", "error": HIDDEN}
    assert public["review"]["last"] == HIDDEN and public["note"] == HIDDEN
    assert public["recent_retrains"] == status["recent_retrains"]  # no text to hide: kept as it was
    assert public["open_incidents"][0] == {"id": "inc-1", "report_paths": [HIDDEN, HIDDEN], "detail": ""}
    assert public["ratio"] == "1/2 of the window" and public["hidden"] == 5


def test_last_label_gauge_says_when_the_latest_label_arrived_not_what_its_ts_says(live_daemon):
    """A label dated 2200 used to set the gauge to 7.3e9 (DriftloopLabelsStale, time() - gauge > 6h, could
    never fire again), and a backfill of old labels to long ago (it fired although labels flowed)."""
    _, url = live_daemon(overrides={"model": {"max_future_seconds": None}})  # refused by default this far ahead
    sent = time.time()
    r = httpx.post(f"{url}/v1/labels", json=[{"id": "far-future", "label": 1, "ts": "2200-01-01T00:00:00+14:00"},
                                             {"id": "far-past", "label": 0, "ts": "2001-01-01T00:00:00Z"}], timeout=10)
    assert r.status_code == 200 and r.json()["stored"] == 2, r.text
    answered = time.time()
    families = text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=10).text)
    gauge = [s.value for f in families for s in f.samples if s.name == "driftloop_model_last_label_timestamp_seconds"]
    assert len(gauge) == 1 and sent - 1 <= gauge[0] <= answered + 1, (gauge, sent)
