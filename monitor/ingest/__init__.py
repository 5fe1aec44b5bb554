"""Ingestion: the HTTP API that validates prediction and label records (with
:mod:`monitor.records`) and stores them, and its self-metrics. ``create_app`` (FastAPI) is imported
on first use so that importing this package does not pull in the web stack.

    app = create_app(cfg, store, registry)        # /v1/predictions, /v1/labels, /healthz, /metrics
"""
from __future__ import annotations

from monitor.lazy import lazy_attributes

__all__ = ["IngestMetrics", "RecordValidator", "create_app", "require_token"]

_LAZY = {
    "create_app": "monitor.ingest.app",
    "IngestMetrics": "monitor.ingest.metrics",
    "RecordValidator": "monitor.records.validation",
    "require_token": "monitor.ingest.security",
}

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
