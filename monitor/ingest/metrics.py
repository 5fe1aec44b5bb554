"""Self-metrics of ingestion, as a collector that builds fresh metric families on every scrape.

    driftloop_ingest_records_total{model, kind, outcome="stored"|"duplicate"}      counter
    driftloop_ingest_rejected_total{model, kind, reason}                          counter (requests)
    driftloop_ingest_batch_duration_seconds{model, kind}                          histogram
    driftloop_store_rows{model, table="predictions"|"labels"}                     gauge
    driftloop_store_up{model}                                                     gauge 0/1
    driftloop_store_writable{model}                                               gauge 0/1

A rejected request rejects its whole batch, so ``rejected_total`` counts requests; for the
``validation`` and ``conflict`` reasons the request's records are also counted in
``driftloop_ingest_rejected_records_total``. Row counts are cached for ``rows_ttl_seconds``: counting a
large PostgreSQL table on every scrape would cost more than the answer is worth.
"""
from __future__ import annotations

import bisect
import logging
import threading
import time
from typing import Callable, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from monitor.errors import StoreError

log = logging.getLogger(__name__)

KINDS = ("prediction", "label")
OUTCOMES = ("stored", "duplicate")
REASONS = ("validation", "conflict", "too_large", "unauthorized", "malformed", "unavailable", "busy", "timeout")
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _Histogram:
    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS, value)] += 1
        self.sum += value

    def cumulative(self) -> list[tuple[str, int]]:
        out, total = [], 0
        for bound, count in zip([*map(repr, BUCKETS), "+Inf"], self.counts):
            total += count
            out.append((bound, total))
        return out


class IngestMetrics:
    """Counts what the ingestion routes do. ``row_counts`` (usually ``store.row_counts``) feeds the
    store gauges; ``clock`` is monotonic time, injected for the cache."""

    def __init__(self, model: str, row_counts: Callable[[], dict[str, int]] | None = None,
                 rows_ttl_seconds: float = 15.0, clock: Callable[[], float] = time.monotonic,
                 writable: Callable[[], bool | None] | None = None):
        self.model = model
        self._row_counts = row_counts
        self._writable = writable
        self._ttl = rows_ttl_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._records = {(k, o): 0 for k in KINDS for o in OUTCOMES}
        self._rejected = {(k, r): 0 for k in KINDS for r in REASONS}
        self._rejected_records = {(k, r): 0 for k in KINDS for r in ("validation", "conflict")}
        self._durations = {k: _Histogram() for k in KINDS}
        self._rows: tuple[float, dict[str, int] | None] | None = None

    def accepted(self, kind: str, stored: int, duplicates: int, seconds: float) -> None:
        with self._lock:
            self._records[(kind, "stored")] += stored
            self._records[(kind, "duplicate")] += duplicates
            self._durations[kind].observe(seconds)

    def rejected(self, kind: str, reason: str, records: int = 0, seconds: float | None = None) -> None:
        with self._lock:
            self._rejected[(kind, reason)] += 1
            if (kind, reason) in self._rejected_records:
                self._rejected_records[(kind, reason)] += records
            if seconds is not None:
                self._durations[kind].observe(seconds)

    def _current_rows(self, fresh: bool = False) -> dict[str, int] | None:
        now = self._clock()
        # A failure is not cached: the next scrape asks again, so the gauge follows a recovery.
        if not fresh and self._rows is not None and self._rows[1] is not None and now - self._rows[0] < self._ttl:
            return self._rows[1]
        try:
            rows = self._row_counts() if self._row_counts else None
        except StoreError as exc:
            log.warning("store row counts unavailable: %s", exc)
            rows = None
        self._rows = (now, rows)
        return rows

    def describe(self) -> Iterable[Metric]:
        """Names only, for the registry's duplicate check (without querying the store)."""
        yield CounterMetricFamily("driftloop_ingest_records", "", labels=["model", "kind", "outcome"])
        yield CounterMetricFamily("driftloop_ingest_rejected", "", labels=["model", "kind", "reason"])
        yield CounterMetricFamily("driftloop_ingest_rejected_records", "", labels=["model", "kind", "reason"])
        yield HistogramMetricFamily("driftloop_ingest_batch_duration_seconds", "", labels=["model", "kind"])
        if self._row_counts is not None:
            yield GaugeMetricFamily("driftloop_store_up", "", labels=["model"])
            yield GaugeMetricFamily("driftloop_store_rows", "", labels=["model", "table"])
        if self._writable is not None:
            yield GaugeMetricFamily("driftloop_store_writable", "", labels=["model"])

    def collect(self) -> Iterable[Metric]:
        m = self.model
        writable = None
        if self._writable is not None:
            writable = self._writable()
            gauge = GaugeMetricFamily("driftloop_store_writable", "1 when the store can take a write now "
                                      "(not down, read-only, full or locked beyond its busy timeout).",
                                      labels=["model"])
            gauge.add_metric([m], 1 if writable else 0)
            yield gauge
        with self._lock:
            records = dict(self._records)
            rejected = dict(self._rejected)
            rejected_records = dict(self._rejected_records)
            durations = {k: (h.cumulative(), h.sum) for k, h in self._durations.items()}
        fam = CounterMetricFamily("driftloop_ingest_records", "Records accepted by the ingestion API.",
                                  labels=["model", "kind", "outcome"])
        for (kind, outcome), value in records.items():
            fam.add_metric([m, kind, outcome], value)
        yield fam
        fam = CounterMetricFamily("driftloop_ingest_rejected", "Ingestion requests rejected (each rejects its whole "
                                                               "batch).",
                                  labels=["model", "kind", "reason"])
        for (kind, reason), value in rejected.items():
            fam.add_metric([m, kind, reason], value)
        yield fam
        fam = CounterMetricFamily("driftloop_ingest_rejected_records", "Records in batches rejected for validation or "
                                                                       "conflict.",
                                  labels=["model", "kind", "reason"])
        for (kind, reason), value in rejected_records.items():
            fam.add_metric([m, kind, reason], value)
        yield fam
        histogram = HistogramMetricFamily("driftloop_ingest_batch_duration_seconds",
                                          "Time to parse, validate and store one batch.", labels=["model", "kind"])
        for kind, (buckets, total) in durations.items():
            histogram.add_metric([m, kind], buckets, total)
        yield histogram
        if self._row_counts is None:
            return
        rows = self._current_rows(fresh=writable is False)  # a store that cannot write: is it there at all?
        up = GaugeMetricFamily("driftloop_store_up", "1 when the store answered the last row count (cached "
                               "for up to 15 s, asked afresh while the store is not writable).", labels=["model"])
        up.add_metric([m], 0 if rows is None else 1)
        yield up
        if rows is not None:
            gauge = GaugeMetricFamily("driftloop_store_rows", "Rows in the store.", labels=["model", "table"])
            for table, value in rows.items():
                gauge.add_metric([m, table], value)
            yield gauge
