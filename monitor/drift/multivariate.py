"""Multivariate drift of the tabular features: NannyML's data reconstruction drift.

Per-feature tests see each column alone: two features whose correlation flips while each keeps its
distribution pass every one of them. The reconstruction error sees how the features vary together.
The reference's rows are encoded and standardised, and projected on the principal components that
explain 65 % of their variance; a row's error is its distance from its reconstruction from those
components. A window whose features no longer co-vary as the reference's did has rows off the
reference's components, and its mean error rises. It falls when rows lose variation the reference had
off its components: a feature of its own that stops arriving and is filled with the reference's mean.

**Encoding** (as NannyML's ``DataReconstructionDriftCalculator``; fitted on the reference):

* numeric: a missing value is the reference's mean;
* categorical: a missing value is the reference's most frequent value, and each value is replaced by
  its share of the reference's rows (frequency encoding; a value the reference never had: 0);
* every column standardised by the reference's mean and standard deviation (a constant column's: 1),
  clipped at a million standard deviations, so a stored 3.4e38 stays a finite error.

Features with no value in the reference are left out, and embeddings have their own test. At most
all components but one are kept: with all kept, every error is 0 (two uncorrelated features need both
for 65 %).

**Band** (NannyML draws it from the reference's chunks: their mean ± 3 sd). The window's figure is
the mean error of its drift sample (``rows``, at most ``drift.sample_size``), so a reference chunk
here has the window's size: the reference's rows, in their order, cut into chunks of that many. The
band is ``centre ± drift.multivariate_threshold_sd × sd`` (lower end clipped at 0), where ``sd`` is
the larger of

* the chunks' standard deviation, when the reference holds at least :data:`MIN_CHUNKS` of them
  (it carries whatever the reference varies by over time, as NannyML's does), and
* the standard deviation of the difference between a mean of that many independent rows and the
  reference's mean (row sd x sqrt(1 / rows + 1 / reference rows)): a floor, since six to ten chunks
  estimate their spread only to ±25-30 %, and the common case (a 5,000-row window against a
  20,000-row reference sample) has four chunks.

On NannyML's own datasets the error equals NannyML's on every chunk and the verdicts mostly agree
(``bench/bench_multivariate.py``; docs/benchmarks.md says where and why they differ).

The reference's errors are *cross-fitted*: each row's error comes from components fitted on the
other folds (:data:`FOLDS`), as a window's row is one the components never saw. In-sample, the fit
takes part of each row's residual with it: at 300 reference rows of 20 features, new rows read 1.5 %
higher than the reference's in-sample errors, three quarters of the band's sd at a 300-row window,
and in a side run 5 of 100 stationary windows were flagged (1 of 100 cross-fitted; the gap is
asserted in ``tests/monitor/drift/test_multivariate.py``). The window is judged with the components fitted on
the whole reference sample.

**Cost.** Fitted once per champion on the reference's drift sample (cached with the prepared
reference; an eigendecomposition of a features x features matrix, five times more for the folds), and
per check one matrix product over the window's drift sample: milliseconds at 20,000 x 10.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from monitor.config import DriftConfig, ModelConfig
from monitor.drift import embedding_methods as em
from monitor.drift.result import MultivariateDrift

FOLDS = 5                  # cross-fitting folds of the reference's errors
MIN_CHUNKS = 6             # window-sized reference chunks before their spread counts
MIN_REFERENCE_ROWS = 50    # reference rows the fit needs (ten per fold)
MIN_ROWS = 20              # window rows before a mean error means anything
CLIP = 1e6                 # standardised values are clipped to this many standard deviations


@dataclass(frozen=True)
class Encoding:
    """The reference's encoding of the tabular features as a numeric matrix (module docstring)."""

    numeric: tuple[str, ...]
    categorical: tuple[str, ...]
    fill: np.ndarray                         # per numeric column: the reference mean
    modes: tuple[Any, ...]                   # per categorical column: its most frequent value
    shares: tuple[dict[Any, float], ...]     # per categorical column: value -> share of reference rows
    centre: np.ndarray                       # per encoded column (numeric first)
    scale: np.ndarray

    @property
    def columns(self) -> list[str]:
        return [*self.numeric, *self.categorical]

    def raw(self, frame: pd.DataFrame) -> np.ndarray:
        """Imputed and encoded, before standardisation: ``(rows, columns)`` float64."""
        out = np.empty((len(frame), len(self.numeric) + len(self.categorical)), dtype=np.float64)
        for i, name in enumerate(self.numeric):
            values = frame[name].to_numpy(dtype=np.float64, na_value=np.nan)
            out[:, i] = np.where(np.isnan(values), self.fill[i], values)
        for j, name in enumerate(self.categorical):
            values = frame[name].astype(object).where(frame[name].notna(), self.modes[j])
            out[:, len(self.numeric) + j] = values.map(self.shares[j]).to_numpy(dtype=np.float64, na_value=0.0)
        return out

    def matrix(self, frame: pd.DataFrame) -> np.ndarray:
        """Standardised by the reference (module docstring)."""
        return np.clip((self.raw(frame) - self.centre) / self.scale, -CLIP, CLIP)


def fit_encoding(frame: pd.DataFrame, numeric: list[str], categorical: list[str]) -> Encoding:
    """The encoding of ``frame`` (the reference) for the given columns, each with at least one value."""
    fill = np.array([float(np.nanmean(frame[c].to_numpy(dtype=np.float64, na_value=np.nan))) for c in numeric])
    modes, shares = [], []
    for name in categorical:
        counts = frame[name].value_counts(dropna=True)
        mode = counts.index[0]
        counts[mode] += int(frame[name].isna().sum())   # NannyML imputes before it counts
        modes.append(mode)
        shares.append({k: float(v) / len(frame) for k, v in counts.items()})
    partial = Encoding(tuple(numeric), tuple(categorical), fill, tuple(modes), tuple(shares),
                       np.zeros(len(numeric) + len(categorical)), np.ones(len(numeric) + len(categorical)))
    raw = partial.raw(frame)
    scale = raw.std(axis=0)
    scale[~(scale > 0) | ~np.isfinite(scale)] = 1.0    # a constant column, as scikit-learn's StandardScaler
    return Encoding(partial.numeric, partial.categorical, fill, partial.modes, partial.shares, raw.mean(axis=0), scale)


def principal_components(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(mean, components, explained ratio)`` of the rows of ``x``: components as rows, by variance,
    highest first. Why not scikit-learn's PCA: the matrix is features x features, and numpy's
    eigendecomposition of it is the whole job, without importing scikit-learn into every check."""
    mean = x.mean(axis=0)
    centred = x - mean
    covariance = centred.T @ centred / max(len(x) - 1, 1)
    values, vectors = np.linalg.eigh(covariance)
    order = np.argsort(values)[::-1]
    values = np.maximum(values[order], 0.0)
    total = float(values.sum())
    return mean, vectors[:, order].T, values / total if total > 0 else np.zeros_like(values)


def reconstruction_errors(x: np.ndarray, mean: np.ndarray, components: np.ndarray) -> np.ndarray:
    """Each row's distance from its reconstruction from ``components`` (orthonormal rows)."""
    centred = x - mean
    return em.reconstruction_errors(centred, centred @ components.T, len(components))


def kept_components(explained: np.ndarray) -> int:
    """NannyML's 65 % of the variance, at most all components but one (module docstring)."""
    return max(1, min(em.reconstruction_components(explained), len(explained) - 1))


@dataclass(frozen=True)
class Band:
    centre: float
    sd: float
    lower: float
    upper: float
    chunks: int


@dataclass(frozen=True)
class MultivariateReference:
    """The reference's side of the test, prepared once per champion."""

    encoding: Encoding
    mean: np.ndarray           # the components' centre
    components: np.ndarray     # (kept, features)
    explained: float           # share of the variance the kept components explain
    errors: np.ndarray         # cross-fitted, one per reference row, in the reference's order

    def errors_of(self, frame: pd.DataFrame) -> np.ndarray:
        return reconstruction_errors(self.encoding.matrix(frame), self.mean, self.components)

    def band(self, rows: int, sds: float) -> Band:
        """The band of a window's mean error over ``rows`` rows (module docstring)."""
        errors = self.errors
        centre = float(errors.mean())
        sd = float(errors.std()) * math.sqrt(1 / rows + 1 / len(errors))
        chunks = len(errors) // rows
        if chunks >= MIN_CHUNKS:
            means = errors[:chunks * rows].reshape(chunks, rows).mean(axis=1)
            centre = float(means.mean())
            sd = max(sd, float(means.std()))        # NannyML: np.nanstd of the chunks' values
        return Band(centre, sd, max(centre - sds * sd, 0.0), centre + sds * sd, chunks)


def tabular_columns(frame: pd.DataFrame, model_cfg: ModelConfig) -> tuple[list[str], list[str]]:
    """The numeric and categorical features with at least one value in ``frame``."""
    def present(names: list[str]) -> list[str]:
        return [c for c in names if c in frame.columns and bool(frame[c].notna().any())]
    return present(model_cfg.numeric_features), present(model_cfg.categorical_features)


def prepare_multivariate(reference: pd.DataFrame, model_cfg: ModelConfig, drift_cfg: DriftConfig,
                         seed: int = 0) -> MultivariateReference | str | None:
    """The fitted reference (from its drift sample, ``reference``), why it cannot be, or None when the
    test is off (``drift.multivariate``) or the model has fewer than two tabular features."""
    if not drift_cfg.multivariate or len(model_cfg.tabular_features) < 2:
        return None
    numeric, categorical = tabular_columns(reference, model_cfg)
    if len(numeric) + len(categorical) < 2:
        return f"{len(numeric) + len(categorical)} tabular feature(s) with values in the reference, 2 needed"
    if len(reference) < MIN_REFERENCE_ROWS:
        return f"{len(reference)} rows in the reference, {MIN_REFERENCE_ROWS} needed"
    return fit_reference(reference, numeric, categorical, seed)


def fit_reference(reference: pd.DataFrame, numeric: list[str], categorical: list[str],
                  seed: int = 0) -> MultivariateReference:
    """Encoding, components and cross-fitted errors of ``reference``'s rows (module docstring)."""
    encoding = fit_encoding(reference, numeric, categorical)
    x = encoding.matrix(reference)
    mean, components, explained = principal_components(x)
    keep = kept_components(explained)
    folds = np.random.default_rng([seed, 11]).permutation(len(x)) % FOLDS
    errors = np.empty(len(x))
    for fold in range(FOLDS):
        held = folds == fold
        fold_mean, fold_components, _ = principal_components(x[~held])
        errors[held] = reconstruction_errors(x[held], fold_mean, fold_components[:keep])
    return MultivariateReference(encoding, mean, components[:keep], float(explained[:keep].sum()), errors)


def multivariate_drift(prepared: MultivariateReference | str | None, current: pd.DataFrame,
                       drift_cfg: DriftConfig) -> MultivariateDrift | None:
    """The window's verdict (``current``: its drift sample), or None when the test is off."""
    if prepared is None or not drift_cfg.multivariate:
        return None
    if isinstance(prepared, str):
        return MultivariateDrift(None, None, None, False, skipped=prepared)
    features = len(prepared.encoding.columns)
    if len(current) < MIN_ROWS:
        return MultivariateDrift(None, None, None, False, skipped=f"{len(current)} rows in the window, "
                                 f"{MIN_ROWS} needed", features=features, reference_rows=len(prepared.errors))
    error = float(prepared.errors_of(current).mean())
    band = prepared.band(len(current), drift_cfg.multivariate_threshold_sd)
    return MultivariateDrift(error, band.lower, band.upper, not band.lower < error < band.upper,  # NannyML's alert
                             features=features, components=len(prepared.components), explained=prepared.explained,
                             rows=len(current), reference_rows=len(prepared.errors), reference_error=band.centre,
                             sd=band.sd, reference_chunks=band.chunks)
