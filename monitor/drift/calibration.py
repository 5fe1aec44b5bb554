"""The isotonic calibrator of confidence-based performance estimation (CBPE,
:mod:`monitor.drift.estimation`) and the band of the accuracy it expects.

A :class:`Calibrator` maps a raw score to ``P(y = 1 | score)``, fitted with scikit-learn's
isotonic regression on the champion's labelled reference rows. The expected accuracy ``mean(q_i)``
of a window has two variances: the Bernoulli one of its rows, ``sum q_i (1 - q_i) / n^2``, and the
one the finite reference adds, ``sum_b (n_b / n)^2 q_b (1 - q_b) / r_b`` over the reference scores'
``CALIBRATION_BINS`` quantile bins (``n_b`` window rows and ``r_b`` reference rows in bin b, ``q_b``
their mean q), which grows when a shift moves the window onto scores the reference saw rarely.
Binary and multiclass CBPE (:mod:`monitor.drift.multiclass_estimation`) share both.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Protocol

import numpy as np

MIN_CALIBRATION_ROWS = 100  # fewer labelled reference rows (or one class only): no estimation
CALIBRATION_BINS = 20       # quantile bins of the reference scores, for the calibration term of the band


class Binned(Protocol):
    """What the calibration term of the band needs of a calibrator: its reference rows per quantile
    bin, and the bin of each score."""

    @property
    def counts(self) -> np.ndarray: ...

    def bins(self, scores: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class Calibrator:
    """Isotonic map from raw score to P(y = 1), fitted on ``rows`` reference rows."""

    thresholds: np.ndarray   # increasing scores ...
    values: np.ndarray       # ... and the calibrated probability at each (linear in between, clipped outside)
    rows: int
    edges: np.ndarray        # inner edges of the reference scores' quantile bins
    counts: np.ndarray       # reference rows per bin (len(edges) + 1 bins)

    def __call__(self, scores: np.ndarray) -> np.ndarray:
        return np.interp(np.asarray(scores, dtype=np.float64), self.thresholds, self.values)

    def bins(self, scores: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.edges, scores, side="right")


def fit_calibrator(y: np.ndarray, scores: np.ndarray) -> Calibrator | None:
    """Fit on the reference's labelled rows; None with too few rows or a single class."""
    y = np.asarray(y, dtype=np.float64)
    s = np.asarray(scores, dtype=np.float64)
    if len(y) < MIN_CALIBRATION_ROWS or y.min() == y.max():
        return None
    from sklearn.isotonic import IsotonicRegression  # sklearn is heavy to import; only the checks need it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(s, y)
    return Calibrator(np.asarray(iso.X_thresholds_, dtype=np.float64),
                      np.asarray(iso.y_thresholds_, dtype=np.float64), len(y), *quantile_bins(s))


def quantile_bins(values: np.ndarray, bins: int = CALIBRATION_BINS) -> tuple[np.ndarray, np.ndarray]:
    """Inner edges of ``bins`` quantile bins of ``values`` (ties merged) and the rows in each bin."""
    edges = np.unique(np.quantile(values, np.linspace(0.0, 1.0, bins + 1)[1:-1]))
    return edges, np.bincount(np.searchsorted(edges, values, side="right"), minlength=len(edges) + 1)


def _calibration_variance(calibrator: Binned, scores: np.ndarray, q: np.ndarray) -> float:
    """Variance the finite reference adds to ``mean(q)`` (module docstring)."""
    k = len(calibrator.counts)
    b = calibrator.bins(scores)
    n_b = np.bincount(b, minlength=k).astype(np.float64)
    q_b = np.bincount(b, weights=q, minlength=k) / np.maximum(n_b, 1.0)
    share = n_b / len(scores)
    return float((share * share * q_b * (1.0 - q_b) / np.maximum(calibrator.counts, 1)).sum())


def _accuracy_interval(calibrator: Binned, scores: np.ndarray, q: np.ndarray, z: float) -> tuple[float, float]:
    """``mean(q)`` plus or minus z times the root of its Bernoulli and calibration variances."""
    n = len(q)
    acc = float(q.mean())
    half = z * math.sqrt(float((q * (1.0 - q)).sum()) / (n * n) + _calibration_variance(calibrator, scores, q))
    return max(0.0, acc - half), min(1.0, acc + half)
