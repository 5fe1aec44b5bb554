"""The whole loop feeding the bundle: a real `driftloop serve` (simulated GPUs, started through the
Docker image's entrypoint with its token in a file, as docker-compose.yml runs it), a baseline trained
with `driftloop train`, drifted traffic and labels sent with DriftloopClient, the daemon's own check
opening an incident and retraining, Alertmanager (our alertmanager.yml) delivering a model alert to
/v1/alerts with the token, and a Prometheus (our prometheus.yml jobs and rules) scraping it all.
Then every dashboard query must return data and every rule must evaluate on existing series."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pandas as pd
import pytest

from monitor.client import DriftloopClient
from tests.conftest import free_port
from tests.observability.live import (empty_queries, entrypoint_script, query_range, rule_selectors_without_data,
                                      start_alertmanager_like_ours, start_like_ours, wait_rules_evaluated)
from tests.observability.promql import load_dashboards, load_rules, task_panels
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

TOKEN = "test-token-0123456789"
TRAFFIC_ROWS = 1500  # above drift.min_labels (1000): performance alerts are allowed to fire
# Simulated GPUs raise no XID events; test_live_gpu.py covers XIDs with the fake NVML backend. The
# loop's model is binary: the multiclass and regression panels and the MAE alert have their series
# in test_task_dashboards.py. It has no drift.descriptors: tests/monitor/drift/test_descriptors.py checks
# that their panels select the series the collector serves for them, and rules/tests/pipeline.test.yml
# fires their alert.
NO_DATA_HERE = {"gpu-fleet.json": {"XID errors"},
                "model-health.json": {p["title"]
                                      for panels in task_panels(load_dashboards()["model-health.json"]).values()
                                      for p in panels} | {"Descriptor drift", "Drifted descriptors",
                                                          "Descriptor inputs unread"}}
NOT_HERE_RULES = {"DriftloopGpuXidErrors", "DriftloopModelMaeRise", "DriftloopDescriptorInputsUnreadable"}

PREPARE = """
import sys
from pathlib import Path

from monitor.cli import main
from monitor.config import load_config
import trainer
from trainer.synthetic import make_dataset

out = Path(sys.argv[1])
make_dataset(4000, seed=1).to_csv(out / "train.csv", index=False)
rc = main(["train", "--data", str(out / "train.csv"), "--quiet"])
if rc:
    sys.exit(rc)
# The champion's constraints file: the drifted traffic below breaks its ranges (x5's mean moves by 0.8),
# which feeds the Constraint violations panel and DriftloopModelConstraintViolations.
rc = main(["baseline-constraints"])
if rc:
    sys.exit(rc)
# What a model service does: score live traffic with the champion. The traffic has drifted
# (features moved, and the labelling changed), so the champion is worse on it than on its baseline.
champion = trainer.load_champion(load_config())
traffic = make_dataset(int(sys.argv[2]), seed=2, covariate_shift=1.0, concept_shift=1.0)
traffic["score"] = champion.predict_proba(traffic)
traffic.insert(0, "id", [f"req-{i:05d}" for i in range(len(traffic))])
traffic.to_parquet(out / "traffic.parquet")
"""

# The model service after a promotion: it follows @champion and says which version scored each row
# (rows sent without a version are stored as the champion of their arrival, so a new champion is
# judged only on traffic it served).
RESCORE = """
import sys
from pathlib import Path

from monitor.config import load_config
import trainer
from trainer.synthetic import make_dataset

out = Path(sys.argv[1])
champion = trainer.load_champion(load_config())
traffic = make_dataset(int(sys.argv[2]), seed=3, covariate_shift=1.0, concept_shift=1.0)
traffic["score"] = champion.predict_proba(traffic)
traffic["model_version"] = champion.version
traffic.insert(0, "id", [f"req-after-{i:05d}" for i in range(len(traffic))])
traffic.to_parquet(out / "traffic-after.parquet")
"""


def _env(home: Path, port: int, token_file: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRIFTLOOP_")}
    env.update({
        "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}",
        "DRIFTLOOP_HOME": str(home),
        "DRIFTLOOP_SERVER__PORT": str(port),
        "SERVER_TOKEN_FILE": str(token_file),  # read by the image's entrypoint, as in docker-compose.yml
        "DRIFTLOOP_EXPORTER__SIMULATE": "2",
        "DRIFTLOOP_EXPORTER__PROCESS_METRICS": "true",
        "DRIFTLOOP_EXPORTER__PCIE_THROUGHPUT": "true",
        "DRIFTLOOP_EXPORTER__PCIE_INTERVAL_SECONDS": "0.5",
        "DRIFTLOOP_DRIFT__INTERVAL_SECONDS": "3",
        "DRIFTLOOP_MODEL__SEGMENTS": '["region", "hour_of_day"]',
        # one alerts.rules entry, so the per-rule series (DriftloopModelMetricDrop) exist; a 0.5 drop never fires
        "DRIFTLOOP_ALERTS__RULES": '[{metric: positive_rate, drop: 0.5}]',
        "DRIFTLOOP_TRAINING__EPOCHS": "3",
        "DRIFTLOOP_TRAINING__RETRAIN_EPOCHS": "2",
        "DRIFTLOOP_TRAINING__REFERENCE_SAMPLE": "1000",
        "DRIFTLOOP_TRAINING__DEVICE": "cpu",
        "DRIFTLOOP_TRAINING__PROGRESS": "false",
    })
    return env


def _wait(what: str, predicate, timeout: float, interval: float = 1.0, on_timeout=lambda: ""):
    return wait_until(predicate, timeout, interval, lambda: f"{what}. {on_timeout()}")


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    work = tmp_path_factory.mktemp("live-daemon")
    home, port = work / "home", free_port()
    token_file = work / "driftloop-token"
    token_file.write_text(TOKEN + "\n")
    env = _env(home, port, token_file)
    prep = subprocess.run([sys.executable, "-c", PREPARE, str(work), str(TRAFFIC_ROWS)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)
    assert prep.returncode == 0, prep.stderr[-3000:]

    log = work / "serve.log"
    serve = subprocess.Popen([entrypoint_script(work), "serve"], cwd=work, env=env, stdout=open(log, "wb"),
                             stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    procs = []
    try:
        def up() -> bool:
            if serve.poll() is not None:
                raise AssertionError(f"driftloop serve exited {serve.returncode}: {log.read_text()[-3000:]}")
            try:
                return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False
        _wait("driftloop serve /healthz", up, 90, 0.5)
        am = start_alertmanager_like_ours(work / "alertmanager", url, token_file)
        procs.append(am)
        target = f"127.0.0.1:{port}"
        prom = start_like_ours(work / "prometheus", {"driftloop": [target], "alertmanager": [am.url[len("http://"):]]},
                               alertmanager=am.url[len("http://"):])
        procs.append(prom)
        yield {"url": url, "target": target, "prom": prom, "am": am, "work": work, "log": log,
               "started": time.time(), "traffic": pd.read_parquet(work / "traffic.parquet"), "env": env}
    finally:
        for p in reversed(procs):
            p.stop()
        serve.terminate()
        try:
            serve.wait(30)
        except subprocess.TimeoutExpired:
            serve.kill()


def test_writes_need_the_token_from_the_file(loop):
    r = httpx.post(f"{loop['url']}/v1/alerts", json={"version": "4", "status": "firing", "alerts": []}, timeout=10)
    assert r.status_code == 401
    r = httpx.post(f"{loop['url']}/v1/alerts", json={"version": "4", "status": "firing", "alerts": []},
                   headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert r.status_code == 200, r.text


def test_closed_loop_feeds_every_dashboard_and_rule(loop):
    prom, am, url, log = loop["prom"], loop["am"], loop["url"], loop["log"]
    tail = lambda: log.read_text()[-3000:]  # noqa: E731
    value = lambda expr: float(r[0]["value"][1]) if (r := prom.query(expr)) else None  # noqa: E731
    t0 = time.monotonic()
    phase = lambda what: print(f"[{time.monotonic() - t0:6.1f} s] {what}", flush=True)  # noqa: E731
    prom.wait_for('driftloop_incidents_total{reason="alertmanager"}', timeout=30)

    # 1. A model alert through Alertmanager (our routing tree, the token from its file) opens an incident.
    #    reason=drift: noted, no retrain (alerts.retrain_on_drift is false). Resolving it closes the incident.
    labels = {"alertname": "DriftloopDataDriftHigh", "severity": "warning", "team": "ml", "component": "model",
              "reason": "drift", "model": "demo", "job": "driftloop", "instance": loop["target"]}
    now = datetime.now(timezone.utc)
    am.post([{"labels": labels, "annotations": {"summary": "drift (test)"}, "startsAt": now.isoformat()}])
    _wait("the Alertmanager incident", lambda: value('driftloop_incidents_total{reason="alertmanager"}') == 1, 30,
          on_timeout=tail)
    am.post([{"labels": labels, "startsAt": now.isoformat(),
              "endsAt": (datetime.now(timezone.utc) - timedelta(seconds=1)).isoformat()}])
    _wait("the incident to resolve", lambda: value("sum(driftloop_incidents_open)") == 0, 30, on_timeout=tail)

    phase("Alertmanager incident opened and resolved")

    # 2. Traffic: a rejected batch, an unauthenticated one, drifted predictions, a re-send, their labels.
    traffic = loop["traffic"]
    bad = [{"id": "bad-1", "features": {"x0": 1.0}, "score": 2.0}]
    assert httpx.post(f"{url}/v1/predictions", json=bad, headers={"Authorization": f"Bearer {TOKEN}"},
                      timeout=10).status_code == 422
    assert httpx.post(f"{url}/v1/predictions", json=bad, timeout=10).status_code == 401
    with DriftloopClient(url, token=TOKEN) as client:
        assert client.log_predictions(traffic.drop(columns=["label"])).stored == len(traffic)
        assert client.log_predictions(traffic.drop(columns=["label"]).head(100)).duplicates == 100
        assert client.log_labels(traffic[["id", "label"]]).stored == len(traffic)

    phase("traffic sent")

    # 3. The daemon's check sees the accuracy drop, opens an incident and retrains; a check after that.
    _wait("a finished retrain", lambda: (value("sum(driftloop_retrains_total)") or 0) >= 1, 240, 2, on_timeout=tail)
    rescore = subprocess.run([sys.executable, "-c", RESCORE, str(loop["work"]), str(TRAFFIC_ROWS)],
                             cwd=loop["work"], env=loop["env"], capture_output=True, text=True, timeout=300)
    assert rescore.returncode == 0, rescore.stderr[-3000:]
    after = pd.read_parquet(loop["work"] / "traffic-after.parquet")
    with DriftloopClient(url, token=TOKEN) as client:
        assert client.log_predictions(after.drop(columns=["label", "model_version"]),
                                      model_version=str(after["model_version"].iloc[0])).stored == len(after)
        assert client.log_labels(after[["id", "label"]]).stored == len(after)
    _wait("a check after the retrain", lambda: prom.query(
        "driftloop_model_last_check_timestamp_seconds - on (model) "
        "max by (model) (driftloop_retrain_last_outcome_timestamp_seconds) > 0"), 60, on_timeout=tail)
    phase("retrained, checked again")
    settled = time.time()  # a few more scrapes of the post-retrain state
    _wait("more scrapes",
          lambda: prom.query(f"timestamp(driftloop_model_last_check_timestamp_seconds) > {settled + 2}"),
          30, 0.5, on_timeout=tail)
    start, end = loop["started"], time.time()

    # 4. Every dashboard query returns data.
    for name, board in load_dashboards().items():
        skip = NO_DATA_HERE.get(name, set())
        empty = [q for q in empty_queries(prom, name, board, start, end) if not any(f"{s!r}" in q for s in skip)]
        assert empty == [], f"{name}: queries without data:\n" + "\n".join(empty)

    phase("dashboards checked")

    # 5. Every rule evaluates cleanly on series that exist; the accuracy alert's condition was met.
    rules = wait_rules_evaluated(prom)
    assert {n: r.get("lastError") for n, r in rules.items() if r["health"] != "ok"} == {}
    alerts = {r["alert"] for r in load_rules() if "alert" in r}
    assert set(rules) >= alerts
    assert rule_selectors_without_data(prom, alerts - NOT_HERE_RULES, start, end) == []
    accuracy_rule = next(r for r in load_rules() if r.get("alert") == "DriftloopModelAccuracyDrop")
    assert query_range(prom, accuracy_rule["expr"], start, end), "the accuracy drop never met the alert condition"
    phase("rules checked")
