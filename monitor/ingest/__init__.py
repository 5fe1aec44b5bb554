"""Ingestion: validation of prediction and label records, the HTTP API that stores them, and its
self-metrics. ``create_app`` (FastAPI) is imported on first use so that the client, which only needs
:mod:`monitor.ingest.frames`, does not pull in the web stack.

    app = create_app(cfg, store, registry)        # /v1/predictions, /v1/labels, /healthz, /metrics
"""
from __future__ import annotations

from typing import Any

__all__ = ["IngestMetrics", "RecordValidator", "create_app", "require_token"]

_LAZY = {
    "create_app": "monitor.ingest.app",
    "IngestMetrics": "monitor.ingest.metrics",
    "RecordValidator": "monitor.ingest.validation",
    "require_token": "monitor.ingest.security",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'monitor.ingest' has no attribute {name!r}")
