"""What every driftloop process says about itself on ``/metrics``, as Prometheus users expect of any
exporter: the client library's ``process_*`` (CPU, memory, open files, start time), ``python_info``
and ``python_gc_*`` series, and ``driftloop_build_info`` — an info gauge (value 1) whose labels name
the versions of driftloop and of the parts whose behaviour it depends on.

Versions come from installed package metadata (``importlib.metadata``), so asking costs no import of
torch, Evidently or MLflow; a part that is not installed (the exporter alone needs none of them)
reads ``""``. Join it onto any series to see which build produced it, e.g.
``driftloop_model_accuracy * on(instance) group_left(version) driftloop_build_info``.
"""
from __future__ import annotations

import platform
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import GaugeMetricFamily

# label -> distribution name
PARTS = {"version": "driftloop", "torch": "torch", "evidently": "evidently", "mlflow": "mlflow",
         "prometheus_client": "prometheus-client"}


def _installed(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return ""


@lru_cache(maxsize=1)
def build_labels() -> dict[str, str]:
    """``{version, python, torch, evidently, mlflow, prometheus_client}``; ``""`` for a part not installed."""
    labels = {label: _installed(dist) for label, dist in PARTS.items()}
    labels["python"] = platform.python_version()
    return labels


class BuildInfoCollector:
    """``driftloop_build_info{component, version, python, torch, evidently, mlflow, prometheus_client} 1``."""

    def __init__(self, component: str):
        self.component = component

    def collect(self):
        labels = {"component": self.component, **build_labels()}
        family = GaugeMetricFamily("driftloop_build_info", "driftloop's version and those of its main parts "
                                   "(value 1; component: serve or exporter)", labels=list(labels))
        family.add_metric(list(labels.values()), 1.0)
        yield family

    def describe(self):
        return self.collect()


def register_self_metrics(registry: CollectorRegistry, component: str) -> None:
    """Add the process, Python platform, GC and build-info collectors to ``registry``."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    registry.register(BuildInfoCollector(component))
