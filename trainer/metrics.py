"""Binary classification metrics on numpy arrays: numpy only (no scikit-learn or scipy import on
the training path; the GPU benchmark runs with torch, numpy and pandas alone)."""
from __future__ import annotations

import numpy as np


def accuracy(y_true: np.ndarray, proba: np.ndarray, threshold: float = 0.5) -> float:
    y_true = np.asarray(y_true)
    return float(np.mean((np.asarray(proba) > threshold) == (y_true == 1))) if len(y_true) else float("nan")


def roc_auc(y_true: np.ndarray, proba: np.ndarray) -> float:
    """Area under the ROC curve by the rank-sum (Mann-Whitney) identity; ties count one half.
    NaN when only one class is present (the AUC is undefined, not 0.5)."""
    y = np.asarray(y_true) == 1
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = _average_ranks(np.asarray(proba, dtype=np.float64))
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks, tied values sharing the mean of their ranks (scipy's rankdata 'average')."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return (ends - (counts - 1) / 2.0)[inverse]


def log_loss(y_true: np.ndarray, proba: np.ndarray, eps: float = 1e-7) -> float:
    p = np.clip(np.asarray(proba, dtype=np.float64), eps, 1 - eps)
    y = np.asarray(y_true, dtype=np.float64)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))) if len(y) else float("nan")


def binary_metrics(y_true: np.ndarray, proba: np.ndarray, threshold: float = 0.5) -> dict[str, float]:
    return {"accuracy": accuracy(y_true, proba, threshold), "roc_auc": roc_auc(y_true, proba),
            "log_loss": log_loss(y_true, proba)}
