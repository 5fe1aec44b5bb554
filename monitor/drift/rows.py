"""The rows of one side as plain arrays (monitor.tasks): :class:`Labelled` (rows with a label and
a finite score: what the task's performance and the estimators' fits need) and :class:`Scored`
(every row with a finite score: what label-free estimation needs), with the served label of each
row (:func:`served_labels`). Below :mod:`monitor.drift.frames`, which re-exports these names.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from monitor.config import ModelConfig
from monitor.errors import DataError
from monitor.tasks import internal_proba_columns, task_of


def _numeric(frame: pd.DataFrame, column: str, side: str) -> pd.Series:
    """A numeric column as float64; a clear error naming the first bad value otherwise."""
    col = frame[column]
    if pd.api.types.is_bool_dtype(col.dtype) or not pd.api.types.is_numeric_dtype(col.dtype):
        coerced = pd.to_numeric(col, errors="coerce")
        bad = coerced.isna() & col.notna()
        if bad.any():
            pos = int(np.argmax(bad.to_numpy()))
            raise DataError(f"{side} column {column!r} must be numeric; row {pos} holds {col.iloc[pos]!r}")
        col = coerced
    return col.astype("float64", copy=False)


@dataclass(frozen=True)
class Labelled:
    """The labelled rows of one side, as plain arrays (monitor.tasks): the target (0/1, a class
    index, or a number), the served output (0/1, a class index, or the predicted value), the score
    (P(1), the served class's probability, or the predicted value) and, for multiclass, the
    probabilities (rows x classes)."""

    y: np.ndarray
    pred: np.ndarray
    score: np.ndarray
    proba: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.y)

    def frame(self, model_cfg: ModelConfig, positions: np.ndarray | None = None) -> pd.DataFrame:
        sl = slice(None) if positions is None else positions
        out = pd.DataFrame({model_cfg.target: self.y[sl], model_cfg.prediction: self.pred[sl],
                            model_cfg.score: self.score[sl]})
        if self.proba is not None:
            for i, column in enumerate(internal_proba_columns(self.proba.shape[1])):
                out[column] = self.proba[sl, i]
        return out

    def loss(self, task: str) -> np.ndarray:
        """Per-row error: misclassified (0/1) for a classifier, |error| for regression."""
        return task_of(task).per_row_loss(self.y, self.pred)


def _probabilities(frame: pd.DataFrame, model_cfg: ModelConfig, side: str) -> np.ndarray | None:
    """The task's probability columns (multiclass) as a float matrix (rows x classes); None for a
    task without them or frames without them (e.g. a reference sample saved without probabilities)."""
    columns = model_cfg.kind.proba_columns(model_cfg.n_classes)
    if not columns or not all(c in frame.columns for c in columns):
        return None
    return np.column_stack([_numeric(frame, c, side).to_numpy() for c in columns]) if len(frame) else \
        np.empty((0, len(columns)))


def _targets(frame: pd.DataFrame, model_cfg: ModelConfig, side: str) -> np.ndarray:
    """The target column as float (NaN where unlabelled), checked against the task."""
    target = model_cfg.target
    y = pd.to_numeric(frame[target], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    present = frame[target].notna().to_numpy()
    task = model_cfg.kind
    bad = present & ~task.valid_targets(y, model_cfg.n_classes)
    if bad.any():
        pos = int(np.argmax(bad))
        raise DataError(f"{side} column {target!r} must hold {task.expected_targets(model_cfg.n_classes)}; "
                        f"row {pos} holds {frame[target].iloc[pos]!r}")
    return y


def labelled_rows(frame: pd.DataFrame, model_cfg: ModelConfig, side: str) -> Labelled | None:
    """Rows with a label and a finite score. None when the frame has no target column."""
    target, score_col = model_cfg.target, model_cfg.score
    if target not in frame.columns or score_col not in frame.columns:
        return None
    y = _targets(frame, model_cfg, side)
    score = _numeric(frame, score_col, side).to_numpy()
    keep = ~np.isnan(y) & np.isfinite(score)
    proba = _probabilities(frame, model_cfg, side)
    return Labelled(model_cfg.kind.label_array(y[keep]), served_labels(frame, model_cfg, score, keep), score[keep],
                    None if proba is None else proba[keep])


def served_labels(frame: pd.DataFrame, model_cfg: ModelConfig, score: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """What the model served on the kept rows (the task says, :meth:`monitor.tasks.Task.served_rows`):
    a classifier's prediction column, or score > threshold where it is missing (binary), or the most
    probable class (multiclass); a regression model's predicted value, its score."""
    task = model_cfg.kind
    proba = _probabilities(frame, model_cfg, "frame")
    pred = (pd.to_numeric(frame[model_cfg.prediction], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)[keep]
            if model_cfg.prediction in frame.columns else None)
    return task.served_rows(score[keep], None if proba is None else proba[keep], pred, model_cfg.threshold)


@dataclass(frozen=True)
class Scored:
    """Every row with a finite score (labelled or not): what label-free estimation needs.
    ``pred`` is the served label (classifiers) or the predicted value (regression)."""

    score: np.ndarray
    pred: np.ndarray
    proba: np.ndarray | None = None   # multiclass: rows x classes


def scored_rows(frame: pd.DataFrame, model_cfg: ModelConfig, side: str) -> Scored | None:
    if model_cfg.score not in frame.columns:
        return None
    score = _numeric(frame, model_cfg.score, side).to_numpy()
    keep = np.isfinite(score)
    proba = _probabilities(frame, model_cfg, side)
    return Scored(score[keep], served_labels(frame, model_cfg, score, keep), None if proba is None else proba[keep])
