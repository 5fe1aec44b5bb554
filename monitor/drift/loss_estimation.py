"""A regression model's MAE and RMSE estimated before labels arrive: direct loss estimation (DLE,
as in NannyML).

On the champion's reference sample (held-out rows first, see
``trainer.baseline_training.reference_sample``), two small gradient-boosted tree models (scikit-learn's
``HistGradientBoostingRegressor``: native missing values and categories, no new dependency) learn
the champion's loss from its inputs and its own prediction: ``f(x, yhat) ~ E|y - yhat|`` and
``g(x, yhat) ~ E(y - yhat)^2``. On a window's rows (labelled or not) the estimated MAE is
``mean f``, the estimated MSE ``mean g`` and the estimated RMSE its square root.

The band is the binary CBPE's, with a loss in place of a Bernoulli. Each loss model's reference
predictions are cut into ``LOSS_BINS`` quantile bins; in bin b, ``s_b^2`` is the variance of the
reference's out-of-fold residuals (``loss - prediction`` of a model fitted on the other
``LOSS_FOLDS - 1`` folds: in-sample residuals of a boosted model are too small). For a window with
``n_b`` rows in bin b (of n), the realised mean loss differs from the estimate by the rows' own
spread, ``sum_b n_b s_b^2 / n^2``, plus the loss model's error from its finite reference,
``sum_b (n_b / n)^2 s_b^2 / r_b`` (``r_b`` reference rows in bin b), which grows when a shift moves
the window where the reference had few rows. The band is z (``drift.confidence``) times the square
root of the sum; RMSE's is the square root of the MSE band's ends. A window of more than
``LOSS_SAMPLE_ROWS`` rows is scored on a uniform sample of that many (a tree ensemble costs about
5 microseconds a row; the sample's own variance, ``var(f) / m (1 - m / n)``, joins the band).

Like CBPE it assumes ``P(y | x)`` holds (a covariate shift): a change of the target function, or
more noise, is invisible to it. Trees do not extrapolate: far outside the reference the loss model
predicts the loss at the reference's edge. Fitting costs about 1.5 CPU seconds per champion (8 small
fits on a 5,000-row reference); scoring, two ensembles on at most ``LOSS_SAMPLE_ROWS`` rows. Both run
on one thread: on these sizes OpenMP's threads buy little and, on a busy machine, cost a lot (a fit
took 10 times longer with threads contending for two cores). See docs/parts/estimation.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]  # scikit-learn's own dependency

from monitor.config import ModelConfig
from monitor.drift.estimation import quantile_bins

MIN_LOSS_ROWS = 200     # fewer labelled reference rows with a prediction: no estimation
LOSS_FOLDS = 3          # folds of the out-of-fold residuals behind the band
LOSS_BINS = 20          # quantile bins of the predicted loss, for the band
LOSS_SAMPLE_ROWS = 10_000  # window rows the loss models score at most (a uniform sample)
MAX_CATEGORIES = 254    # the histogram trees take category codes below 255; rarer values read as missing
_TREES = {"max_iter": 100, "learning_rate": 0.1, "max_leaf_nodes": 15, "min_samples_leaf": 40,
          "l2_regularization": 1.0, "early_stopping": False, "random_state": 0}


@dataclass(frozen=True)
class Inputs:
    """How a frame becomes the loss models' input matrix: numeric features, categorical features
    as codes of the reference's most frequent values (others and missing: NaN), the prediction."""

    numeric: tuple[str, ...]
    categorical: tuple[str, ...]
    categories: tuple[pd.Index, ...]
    prediction: str

    @classmethod
    def of(cls, reference: pd.DataFrame, model_cfg: ModelConfig) -> Inputs:
        cats = tuple(pd.Index(reference[c].value_counts(dropna=True).index[:MAX_CATEGORIES])
                     for c in model_cfg.categorical_features)
        return cls(tuple(model_cfg.numeric_features), tuple(model_cfg.categorical_features), cats, model_cfg.score)

    @property
    def categorical_mask(self) -> np.ndarray:
        return np.array([False] * len(self.numeric) + [True] * len(self.categorical) + [False])

    def matrix(self, frame: pd.DataFrame) -> np.ndarray:
        columns = [_floats(frame[c]) for c in self.numeric]
        for c, known in zip(self.categorical, self.categories):
            codes = pd.Categorical(frame[c], categories=known).codes.astype(np.float64)
            columns.append(np.where(codes < 0, np.nan, codes))
        columns.append(_floats(frame[self.prediction]))
        return np.column_stack(columns) if columns else np.empty((len(frame), 0))


def _floats(column: pd.Series) -> np.ndarray:
    return pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


@dataclass(frozen=True)
class LossModel:
    """One loss (absolute or squared error) learnt from the inputs, with the band's facts."""

    trees: Any               # a fitted sklearn HistGradientBoostingRegressor
    edges: np.ndarray        # inner edges of the reference predictions' quantile bins
    counts: np.ndarray       # reference rows per bin
    spread: np.ndarray       # out-of-fold residual variance per bin

    def predict(self, x: np.ndarray) -> np.ndarray:
        with threadpool_limits(1):
            return np.maximum(self.trees.predict(x), 0.0)

    def mean_and_variance(self, x: np.ndarray, rows: int) -> tuple[float, float]:
        """Estimated mean loss of ``rows`` window rows, from ``x`` (all of them or a uniform sample),
        and the variance of the realised mean loss around it (module docstring)."""
        f = self.predict(x)
        m = len(f)
        share = np.bincount(np.searchsorted(self.edges, f, side="right"), minlength=len(self.counts)) / m
        rows_term = float((share * self.spread).sum()) / rows
        model_term = float((share * share * self.spread / np.maximum(self.counts, 1)).sum())
        sample_term = float(f.var(ddof=1)) / m * (1.0 - m / rows) if 1 < m < rows else 0.0
        return float(f.mean()), rows_term + model_term + sample_term


@dataclass(frozen=True)
class LossEstimator:
    """What the champion's reference teaches about its loss: fitted once per champion."""

    inputs: Inputs
    absolute: LossModel
    squared: LossModel
    rows: int


@dataclass(frozen=True)
class LossEstimate:
    rows: int
    mae: float
    mae_ci: tuple[float, float]
    rmse: float
    rmse_ci: tuple[float, float]


def _fit_one(x: np.ndarray, loss: np.ndarray, mask: np.ndarray) -> LossModel:
    from sklearn.ensemble import HistGradientBoostingRegressor  # heavy import: only checks need it
    from sklearn.model_selection import KFold

    def trees() -> Any:
        return HistGradientBoostingRegressor(categorical_features=mask, **_TREES)

    out_of_fold = np.empty(len(loss))
    with threadpool_limits(1):
        for fit, held in KFold(LOSS_FOLDS, shuffle=True, random_state=0).split(x):
            out_of_fold[held] = np.maximum(trees().fit(x[fit], loss[fit]).predict(x[held]), 0.0)
        final = trees().fit(x, loss)
        f = np.maximum(final.predict(x), 0.0)
    edges, counts = quantile_bins(f, LOSS_BINS)
    b = np.searchsorted(edges, f, side="right")
    residual = loss - out_of_fold
    k = len(counts)
    mean_b = np.bincount(b, weights=residual, minlength=k) / np.maximum(counts, 1)
    spread = np.bincount(b, weights=(residual - mean_b[b]) ** 2, minlength=k) / np.maximum(counts - 1, 1)
    return LossModel(final, edges, counts, spread)


def fit_loss_estimator(reference: pd.DataFrame, model_cfg: ModelConfig) -> LossEstimator | None:
    """Fit on the reference's labelled rows with a finite prediction; None with fewer than
    ``MIN_LOSS_ROWS`` of them or a column missing."""
    needed = [*model_cfg.feature_names, model_cfg.score, model_cfg.target]
    if any(c not in reference.columns for c in needed):
        return None
    y, yhat = _floats(reference[model_cfg.target]), _floats(reference[model_cfg.score])
    keep = np.isfinite(y) & np.isfinite(yhat)
    if int(keep.sum()) < MIN_LOSS_ROWS:
        return None
    inputs = Inputs.of(reference, model_cfg)
    x = inputs.matrix(reference)[keep]
    err = yhat[keep] - y[keep]
    mask = inputs.categorical_mask
    return LossEstimator(inputs, _fit_one(x, np.abs(err), mask), _fit_one(x, err * err, mask), int(keep.sum()))


def estimate_loss(estimator: LossEstimator, frame: pd.DataFrame, confidence: float = 0.95,
                  rng: np.random.Generator | None = None) -> LossEstimate | None:
    """Estimated MAE and RMSE (with bands) of the frame's rows with a finite prediction (module
    docstring); None for no such rows or a missing column. ``rng`` draws the sample of a large
    window (default: seeded, so a check is reproducible)."""
    inputs = estimator.inputs
    if any(c not in frame.columns for c in (*inputs.numeric, *inputs.categorical, inputs.prediction)):
        return None
    rows = np.flatnonzero(np.isfinite(_floats(frame[inputs.prediction])))
    n = len(rows)
    if n == 0:
        return None
    if n > LOSS_SAMPLE_ROWS:
        rows = np.sort((rng or np.random.default_rng(0)).choice(rows, LOSS_SAMPLE_ROWS, replace=False))
    x = inputs.matrix(frame.iloc[rows])
    z = float(norm.ppf(0.5 + confidence / 2.0))
    mae, mae_var = estimator.absolute.mean_and_variance(x, n)
    mse, mse_var = estimator.squared.mean_and_variance(x, n)
    mae_half, mse_half = z * math.sqrt(mae_var), z * math.sqrt(mse_var)
    return LossEstimate(rows=n, mae=mae, mae_ci=(max(0.0, mae - mae_half), mae + mae_half),
                        rmse=math.sqrt(mse), rmse_ci=(math.sqrt(max(0.0, mse - mse_half)), math.sqrt(mse + mse_half)))
