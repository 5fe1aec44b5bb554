"""driftloop monitor: GPU exporter, ingestion, drift & performance job, alerts, daemon.

Names are imported lazily so that ``import monitor.gpu`` (the exporter) does not pay for pydantic.
"""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from monitor.lazy import lazy_attributes

__all__ = ["DriftloopConfig", "DriftloopError", "load_config"]

def _version() -> str:
    for dist in ("driftloop", "driftloop-client"):  # the full install, or the light client (scripts/build_client.py)
        try:
            return version(dist)  # one source: pyproject.toml
        except PackageNotFoundError:
            continue
    return "0+unknown"  # a source tree that was never installed


__version__ = _version()

__getattr__, __dir__ = lazy_attributes(__name__, {
    "DriftloopConfig": "monitor.config", "load_config": "monitor.config", "DriftloopError": "monitor.errors"})
