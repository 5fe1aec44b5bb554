"""The trainer's metrics are :mod:`monitor.stats` (one metrics module for the trainer and the
monitor, so a model is never judged by two differing ROC AUCs); kept as a module so that
``from trainer.metrics import binary_metrics`` in the training loop keeps working."""
from __future__ import annotations

from monitor.stats import accuracy, binary_metrics, log_loss, roc_auc

__all__ = ["accuracy", "binary_metrics", "log_loss", "roc_auc"]
