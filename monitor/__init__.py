"""driftloop monitor: GPU exporter, ingestion, drift & performance job, alerts, daemon.

Names are imported lazily so that ``import monitor.gpu`` (the exporter) does not pay for pydantic.
"""
from __future__ import annotations

import importlib
from typing import Any

__all__ = ["DriftloopConfig", "DriftloopError", "load_config"]
__version__ = "0.1.0"

_WHERE = {"DriftloopConfig": "monitor.config", "load_config": "monitor.config", "DriftloopError": "monitor.errors"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'monitor' has no attribute {name!r}")
