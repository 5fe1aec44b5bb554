"""Ingestion self-metrics: what the routes count, the store gauges, and a clean `promtool check metrics`."""
from __future__ import annotations

import subprocess

import httpx
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor.errors import StoreError
from monitor.ingest.metrics import IngestMetrics
from tests.monitor.store.factories import labels, prediction, predictions
from tests.support.prometheus import require


def _samples(text: str) -> dict[tuple, float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _value(samples, name, **labels) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_routes_are_counted(api, base_url):
    api.post("/v1/predictions", json=predictions(5))
    api.post("/v1/predictions", json=predictions(6))                        # 5 duplicates
    api.post("/v1/predictions", json=[prediction(0, score=0.99), prediction(50)])  # conflict
    api.post("/v1/predictions", json=[{"id": "x"}, {"id": "y"}, {"id": "z"}])     # validation
    api.post("/v1/labels", json=labels(["r0", "r1"]))
    api.post("/v1/labels", content=b"[", headers={"Content-Type": "application/json"})
    httpx.post(f"{base_url}/v1/labels", json=labels(["r2"]))                  # no token
    api.post("/v1/predictions", content=b"x" * 70_000, headers={"Content-Type": "application/json"})  # too large
    s = _samples(httpx.get(f"{base_url}/metrics").text)
    m = {"model": "m"}
    assert _value(s, "driftloop_ingest_records_total", kind="prediction", outcome="stored", **m) == 6
    assert _value(s, "driftloop_ingest_records_total", kind="prediction", outcome="duplicate", **m) == 5
    assert _value(s, "driftloop_ingest_records_total", kind="label", outcome="stored", **m) == 2
    for kind, reason, n in [("prediction", "conflict", 1), ("prediction", "validation", 1),
                            ("prediction", "too_large", 1),
                            ("label", "malformed", 1), ("label", "unauthorized", 1), ("label", "validation", 0)]:
        assert _value(s, "driftloop_ingest_rejected_total", kind=kind, reason=reason, **m) == n, (kind, reason)
    assert _value(s, "driftloop_ingest_rejected_records_total", kind="prediction", reason="validation", **m) == 3
    assert _value(s, "driftloop_ingest_rejected_records_total", kind="prediction", reason="conflict", **m) == 2
    # accepted (3) and validation/conflict-rejected (2) batches are timed
    assert _value(s, "driftloop_ingest_batch_duration_seconds_count", kind="prediction", **m) == 4
    assert _value(s, "driftloop_ingest_batch_duration_seconds_bucket", kind="prediction", le="+Inf", **m) == 4
    assert _value(s, "driftloop_store_rows", table="predictions", **m) == 6
    assert _value(s, "driftloop_store_rows", table="labels", **m) == 2
    assert _value(s, "driftloop_store_up", **m) == 1


def test_promtool_accepts_the_exposition(api, base_url):
    promtool = require("promtool")
    api.post("/v1/predictions", json=predictions(3))
    text = httpx.get(f"{base_url}/metrics").text
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    openmetrics = httpx.get(f"{base_url}/metrics", headers={"Accept": "application/openmetrics-text"})
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
    assert openmetrics.text.rstrip().endswith("# EOF")


def test_metrics_are_gzipped_when_asked(api, base_url):
    api.post("/v1/predictions", json=predictions(3))
    with httpx.Client() as client:
        plain = client.get(f"{base_url}/metrics", headers={"Accept-Encoding": "identity"})
        packed = client.get(f"{base_url}/metrics", headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in plain.headers
    assert packed.headers["content-encoding"] == "gzip" and len(packed.content) > 0
    assert int(packed.headers["content-length"]) < len(plain.content) / 3
    assert _value(_samples(packed.text), "driftloop_store_rows", table="predictions", model="m") == 3


class Clock:
    t = 100.0

    def __call__(self) -> float:
        return self.t


def test_row_counts_are_cached_and_a_failing_store_reads_as_down():
    calls = []

    def counts() -> dict[str, int]:
        calls.append(1)
        if len(calls) == 2:
            raise StoreError("gone")
        return {"predictions": len(calls), "labels": 0}

    clock = Clock()
    registry = CollectorRegistry()
    registry.register(IngestMetrics("m", counts, rows_ttl_seconds=10, clock=clock))
    first = _samples(generate_latest(registry).decode())
    assert _value(first, "driftloop_store_rows", model="m", table="predictions") == 1
    clock.t += 5
    assert _samples(generate_latest(registry).decode()) == first and len(calls) == 1  # cached
    clock.t += 6
    down = _samples(generate_latest(registry).decode())
    assert _value(down, "driftloop_store_up", model="m") == 0
    assert not any(name == "driftloop_store_rows" for name, _ in down)
    clock.t += 11
    assert _value(_samples(generate_latest(registry).decode()), "driftloop_store_up", model="m") == 1


def test_fresh_families_each_scrape_and_a_fresh_registry_each_app():
    metrics = IngestMetrics("m")
    metrics.accepted("prediction", 3, 1, 0.004)
    first = list(metrics.collect())
    metrics.accepted("prediction", 2, 0, 0.2)
    second = list(metrics.collect())
    assert first is not second and first[0] is not second[0]
    stored = [s for s in second[0].samples if s.labels["outcome"] == "stored" and s.labels["kind"] == "prediction"]
    assert stored[0].value == 5
    histogram = next(f for f in second if f.name == "driftloop_ingest_batch_duration_seconds")
    buckets = {s.labels["le"]: s.value for s in histogram.samples
               if s.name.endswith("_bucket") and s.labels["kind"] == "prediction"}
    assert buckets["0.0025"] == 0 and buckets["0.005"] == 1 and buckets["0.25"] == 2 and buckets["+Inf"] == 2
