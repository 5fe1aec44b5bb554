"""Turning the reference and the current window into what the evaluation needs, cheaply.

Only the model's columns are touched (features, score, prediction, target). Rows are sampled
*before* columns are copied, so a million-row window costs one index draw and a 20k-row copy.
The reference side is prepared once per champion (:class:`PreparedReference`, with the score
calibration that performance estimation needs; cache it with :class:`monitor.drift.DriftEvaluator`).
A side's rows as plain arrays (labelled, scored) come from :mod:`monitor.drift.rows`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from monitor.config import DriftConfig, ModelConfig
from monitor.drift.methods import clean
from monitor.drift.rows import Labelled, Scored, _numeric, _probabilities, labelled_rows, scored_rows, served_labels
from monitor.errors import DataError
from monitor.tasks import internal_proba_columns, proba_column

__all__ = [
    "sample_positions", "Side", "prepare_side", "class_names", "probability_columns", "output_frame",
    "PreparedReference", "missing_ratio", "factorized", "unseen_categories",
    # re-exported from monitor.drift.rows, where they live
    "Labelled", "Scored", "labelled_rows", "scored_rows", "served_labels", "_numeric",
]

if TYPE_CHECKING:  # the estimators read Labelled rows from this module
    from monitor.drift.estimators import Estimator


def sample_positions(n: int, k: int, rng: np.random.Generator) -> np.ndarray | None:
    """Sorted positions of a uniform sample of ``k`` of ``n`` rows; None when all rows are kept."""
    if n <= k:
        return None
    return np.sort(rng.choice(n, size=k, replace=False))


def _take(frame: pd.DataFrame, positions: np.ndarray | None, columns: list[str]) -> pd.DataFrame:
    rows = frame if positions is None else frame.iloc[positions]
    return rows.loc[:, columns].reset_index(drop=True)


def _check_columns(frame: pd.DataFrame, required: list[str], side: str) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise DataError(f"the {side} must be a pandas DataFrame, got {type(frame).__name__}")
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise DataError(f"the {side} lacks column(s) {', '.join(missing)} "
                        f"(expected the model's features and score; has {', '.join(map(str, frame.columns))})")


def _numeric_columns(frame: pd.DataFrame, columns: list[str], side: str) -> pd.DataFrame:
    for c in columns:
        if not pd.api.types.is_float_dtype(frame[c].dtype):
            frame[c] = _numeric(frame, c, side)
    return frame


def _categorical_columns(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    # Evidently compares categories by value: keep them as Python objects, missing as None/NaN.
    for c in columns:
        if frame[c].dtype != object:
            frame[c] = frame[c].astype(object).where(frame[c].notna(), None)
    return frame


@dataclass(frozen=True)
class Side:
    """One side (reference or current) ready for Evidently and numpy."""

    rows: int                               # rows in the full frame
    sample: pd.DataFrame                    # <= sample_size rows of features (+ score, + outputs: output_frame)
    counts: dict[str, int]                  # values present per column in the *sample*
    labelled: Labelled | None               # all labelled rows (arrays)
    has_score: bool
    positions: np.ndarray | None = None     # the sample's rows in the full frame (None: all of them)


def prepare_side(frame: pd.DataFrame, model_cfg: ModelConfig, drift_cfg: DriftConfig,
                 rng: np.random.Generator, side: str) -> Side:
    _check_columns(frame, model_cfg.feature_names, side)
    if len(frame) == 0:
        raise DataError(f"the {side} is empty; nothing to compare")
    has_score = model_cfg.score in frame.columns
    # Embedding columns (one vector per row) stay out of the sample: monitor.drift.embedding tests them.
    columns = model_cfg.tabular_features + ([model_cfg.score] if has_score else [])
    positions = sample_positions(len(frame), drift_cfg.sample_size, rng)
    sample = _take(frame, positions, columns)
    sample = _numeric_columns(sample, model_cfg.numeric_features + ([model_cfg.score] if has_score else []), side)
    sample = _categorical_columns(sample, model_cfg.categorical_features)
    outputs = output_frame(frame if positions is None else frame.iloc[positions], model_cfg, side)
    if outputs is not None:
        sample = pd.concat([sample, outputs], axis=1)
        columns = columns + list(outputs.columns)
    counts = {c: int(len(clean(sample[c]))) for c in columns}
    return Side(len(frame), sample, counts, labelled_rows(frame, model_cfg, side), has_score, positions)


def class_names(model_cfg: ModelConfig) -> list[str]:
    """The classes of a classifier by name (their indices as text when none are configured)."""
    return list(model_cfg.classes) if model_cfg.classes else [str(i) for i in range(model_cfg.n_classes)]


def probability_columns(model_cfg: ModelConfig) -> list[str]:
    """A multiclass drift sample's column of each class's probability, in class order: ``proba_<class>``
    as people name it (and the Evidently report shows it), or the internal ``__proba_<i>`` where such
    a name is a feature's."""
    names = [proba_column(c) for c in class_names(model_cfg)]
    taken = set(model_cfg.feature_names) | {model_cfg.score, model_cfg.prediction}
    if taken & set(names) or len(set(names)) < len(names):
        return internal_proba_columns(model_cfg.n_classes)
    return names


def output_frame(frame: pd.DataFrame, model_cfg: ModelConfig, side: str) -> pd.DataFrame | None:
    """A multiclass model's outputs on ``frame``'s rows, for output drift: the served class by name
    (column ``model.prediction``; None where the row has no finite score) and each class's
    probability (:func:`probability_columns`). None for a task without class probabilities (binary's
    output is P(1), a regression model's its value: the score column either way) and for frames with
    neither probabilities nor a prediction column."""
    if not model_cfg.kind.proba_columns(model_cfg.n_classes) or model_cfg.score not in frame.columns:
        return None
    proba = _probabilities(frame, model_cfg, side)
    if proba is None and model_cfg.prediction not in frame.columns:
        return None
    score = _numeric(frame, model_cfg.score, side).to_numpy()
    keep = np.isfinite(score)
    names = np.asarray(class_names(model_cfg), dtype=object)
    served = np.full(len(frame), None, dtype=object)
    served[keep] = names[np.clip(served_labels(frame, model_cfg, score, keep), 0, len(names) - 1)]
    out = pd.DataFrame({model_cfg.prediction: served})
    if proba is not None:
        for column, values in zip(probability_columns(model_cfg), proba.T):
            out[column] = values
    return out


@dataclass(frozen=True)
class PreparedReference:
    """The reference side, prepared once per champion: its sample, the facts the method choice
    needs from the *full* reference (values present, distinct values when few) and its
    labelled rows."""

    side: Side
    full_counts: dict[str, int]
    distinct: dict[str, frozenset | None]
    missing: dict[str, float]  # share of reference rows without a value, per feature
    calibrator: Estimator | None = None    # the task's label-free estimator (monitor.drift.estimators)
    segments: Any = None                   # monitor.drift.segments.ReferenceSegments, for model.segments
    # The champion's precision, recall, f1 (labelled rows) and served positive_rate (all scored rows)
    # on its reference at model.threshold: the bars of alerts.rules (its MLflow baseline lacks them).
    metrics: dict[str, float] = field(default_factory=dict)
    # Per embedding feature: its projection and held-out projected rows (monitor.drift.embedding), or
    # why it cannot be tested.
    embeddings: dict[str, Any] = field(default_factory=dict)
    # The tabular features' encoding, components and cross-fitted errors (monitor.drift.multivariate),
    # why they cannot be had, or None when the test is off.
    multivariate: Any = None
    # Output drift thresholds from the reference's own bootstrap, by (column, method, window size
    # bucket), filled as checks need them (monitor.drift.output_thresholds).
    output_thresholds: dict[tuple[str, str, int], float | None] = field(default_factory=dict)
    # drift.descriptors: what each kind measures, the vocabulary and the window's cache of values
    # (monitor.drift.descriptors.ReferenceDescriptors); their columns are in side.sample. None when off.
    descriptors: Any = None

    @property
    def rows(self) -> int:
        return self.side.rows


def missing_ratio(frame: pd.DataFrame, columns: list[str]) -> dict[str, float]:
    """Share of rows with no value (None, NaN, NA), per column; 0 for an empty frame."""
    n = len(frame)
    return {c: float(frame[c].isna().sum()) / n if n else 0.0 for c in columns}


def factorized(frame: pd.DataFrame, column: str, cache: dict[str, Any] | None = None) -> tuple[np.ndarray, Any]:
    """``pd.factorize`` of a column (codes, -1 for no value; the distinct values), once per check:
    a hash pass over a million strings costs ~30 ms, and the unseen-category scan and the segments
    both need it (``cache``: one dict per check)."""
    if cache is not None and column in cache:
        return cache[column]
    found = pd.factorize(frame[column], use_na_sentinel=True)
    if cache is not None:
        cache[column] = found
    return found


def unseen_categories(ref: PreparedReference, current: pd.DataFrame, columns: list[str],
                      limit: int = 10, cache: dict[str, Any] | None = None) -> dict[str, list[str]]:
    """Per categorical column, values of ``current`` that the reference never had (at most
    ``limit``, sorted): the model scores them through its unknown bucket. Columns with too many
    distinct reference values to list are left out."""
    out: dict[str, list[str]] = {}
    for c in columns:
        known = ref.distinct.get(c)
        if known is None:
            continue
        new = sorted({str(v) for v in factorized(current, c, cache)[1]} - {str(v) for v in known})
        if new:
            out[c] = new[:limit]
    return out
