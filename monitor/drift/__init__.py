"""Drift & performance evaluation with Evidently.

    result = evaluate_window(reference, window, cfg.model, cfg.drift, baseline.metrics)
    save_report(result, cfg.reports_dir)
    prune_history(cfg.model.name, HistoryPolicy.from_config(cfg.drift), now, reports_dir=cfg.reports_dir)
    registry.register(ModelMetricsCollector(cfg.model.name, lambda: latest_result))

``DriftEvaluator()`` is ``evaluate_window`` with the reference's preparation cached per champion.
Importing this package is cheap: Evidently (seconds to import) loads with ``evaluate_window``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from monitor.lazy import lazy_attributes

__all__ = [
    "CheckResult", "FeatureDrift", "evaluate_window", "DriftEvaluator", "PreparedReference", "prepare_reference",
    "save_report", "ReportPaths", "HistoryPolicy", "Cited", "prune_history", "ModelMetricsCollector",
    "export_samples", "suggest_constraints", "write_constraints",
]

_WHERE = {
    "CheckResult": "monitor.drift.result", "FeatureDrift": "monitor.drift.result",
    "evaluate_window": "monitor.drift.evaluate", "DriftEvaluator": "monitor.drift.evaluate",
    "PreparedReference": "monitor.drift.frames", "prepare_reference": "monitor.drift.reference",
    "save_report": "monitor.drift.reports", "ReportPaths": "monitor.drift.reports",
    "HistoryPolicy": "monitor.drift.history", "Cited": "monitor.drift.history",
    "prune_history": "monitor.drift.history", "ModelMetricsCollector": "monitor.drift.metrics",
    "export_samples": "monitor.drift.sample_export",
    "suggest_constraints": "monitor.drift.constraints", "write_constraints": "monitor.drift.constraints",
}

if TYPE_CHECKING:  # pragma: no cover
    from monitor.drift.evaluate import DriftEvaluator, evaluate_window
    from monitor.drift.frames import PreparedReference
    from monitor.drift.reference import prepare_reference
    from monitor.drift.metrics import ModelMetricsCollector
    from monitor.drift.history import Cited, HistoryPolicy, prune_history
    from monitor.drift.reports import ReportPaths, save_report
    from monitor.drift.result import CheckResult, FeatureDrift
    from monitor.drift.sample_export import export_samples
    from monitor.drift.constraints import suggest_constraints, write_constraints

__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
