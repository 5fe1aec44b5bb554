"""driftloop's trainer: the model, the training loop, checkpoints, the MLflow registry, the
baseline, incremental retraining with a promotion gate, and the synthetic demo data.

Public API (see docs/CONTRACTS.md)::

    train_baseline(cfg, data, *, trigger="manual") -> TrainOutcome
    retrain(cfg, window, *, trigger="manual", incident_id=None, report_paths=(), data_window=None) -> RetrainOutcome
    rollback(cfg) -> (from_version, to_version)
    load_champion(cfg) -> Champion

Names are imported lazily: ``import trainer.loop`` or ``trainer.synthetic`` must not pay for
MLflow (the GPU benchmark runs with torch, numpy and pandas only).
"""
from __future__ import annotations

from monitor.lazy import lazy_attributes

__all__ = [
    "Baseline",
    "Champion",
    "RetrainOutcome",
    "TrainOutcome",
    "load_champion",
    "make_dataset",
    "retrain",
    "rollback",
    "train_baseline",
]

_WHERE = {
    "Baseline": "trainer.outcomes",
    "Champion": "trainer.outcomes",
    "RetrainOutcome": "trainer.outcomes",
    "TrainOutcome": "trainer.outcomes",
    "make_dataset": "trainer.synthetic",
    "train_baseline": "trainer.baseline_training",
    "retrain": "trainer.retraining",
    "rollback": "trainer.retraining",
    "load_champion": "trainer.registry",
    # For the CLI commands, which use only this package API (tests/test_layers.py):
    "champion_schema": "trainer.schema_check",
    "copy_published": "trainer.published",
    "EXIT_INTERRUPTED": "trainer.loop",
    "TrainingInterrupted": "trainer.loop",
    "load_window": "trainer.worker",
    "read_table": "trainer.data",
    "headline": "trainer.metrics",
}

__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
