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
from monitor.tasks import internal_proba_columns
from monitor.taskstats import per_row_loss


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
        return per_row_loss(task, self.y, self.pred)


def _probabilities(frame: pd.DataFrame, model_cfg: ModelConfig, side: str) -> np.ndarray | None:
    """The multiclass probability columns as a float matrix (rows x classes); None for other tasks
    or frames without them (e.g. a reference sample saved without probabilities)."""
    if model_cfg.task != "multiclass":
        return None
    columns = internal_proba_columns(model_cfg.n_classes)
    if not all(c in frame.columns for c in columns):
        return None
    return np.column_stack([_numeric(frame, c, side).to_numpy() for c in columns]) if len(frame) else \
        np.empty((0, len(columns)))


def _targets(frame: pd.DataFrame, model_cfg: ModelConfig, side: str) -> np.ndarray:
    """The target column as float (NaN where unlabelled), checked against the task."""
    target = model_cfg.target
    y = pd.to_numeric(frame[target], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    present = frame[target].notna().to_numpy()
    if model_cfg.task == "regression":
        bad = present & ~np.isfinite(y)
        expected = "numbers"
    else:
        allowed = np.arange(model_cfg.n_classes, dtype=np.float64)
        bad = present & ~np.isin(y, allowed)
        expected = "labels 0 or 1" if model_cfg.task == "binary" else f"class indices 0-{model_cfg.n_classes - 1}"
    if bad.any():
        pos = int(np.argmax(bad))
        raise DataError(f"{side} column {target!r} must hold {expected}; row {pos} holds {frame[target].iloc[pos]!r}")
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
    if model_cfg.task == "regression":
        return Labelled(y[keep], score[keep], score[keep])
    return Labelled(y[keep].astype(np.int64), served_labels(frame, model_cfg, score, keep), score[keep],
                    None if proba is None else proba[keep])


def served_labels(frame: pd.DataFrame, model_cfg: ModelConfig, score: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The served label of the kept rows: the prediction column, or score > threshold where it is
    missing (binary); a multiclass row without one is served its most probable class."""
    if model_cfg.task == "multiclass":
        proba = _probabilities(frame, model_cfg, "frame")
        derived = (np.argmax(proba, axis=1)[keep] if proba is not None and proba.shape[0]
                   else np.zeros(int(keep.sum()), dtype=np.int64))
    else:
        derived = (score[keep] > model_cfg.threshold).astype(np.int64)
    if model_cfg.prediction not in frame.columns:
        return derived.astype(np.int64)
    pred = pd.to_numeric(frame[model_cfg.prediction], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)[keep]
    return np.where(np.isnan(pred), derived, pred).astype(np.int64)


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
    if model_cfg.task == "regression":
        return Scored(score[keep], score[keep])
    proba = _probabilities(frame, model_cfg, side)
    return Scored(score[keep], served_labels(frame, model_cfg, score, keep), None if proba is None else proba[keep])
