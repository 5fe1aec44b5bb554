"""Does the label-free estimate still hold for this champion? And, when it does not, a new one.

The estimator (:mod:`monitor.drift.estimators`) is fitted on the champion's reference sample. That
sample can stop describing how the champion is used: a champion trained on a passing episode was
calibrated on the episode's rows, and when the world went back its estimate read 0.91 against a
realised 0.81 for 65 checks in a row. Labels say when: every window with labelled rows compares the
realised figure with the estimate *on the same labelled rows* and the band the estimate has for
them (:func:`labelled_estimate`: the band is the estimate's own, binary and multiclass CBPE's
accuracy band or direct loss estimation's MAE band, at ``n`` = the labelled rows). A realised value
outside that band is a window the estimator got wrong beyond its own uncertainty; after
``drift.estimation_recalibrate_windows`` of them in a row the daemon refits the estimator on the
champion's recent labelled rows (:func:`refit`, the same fit as on a reference; the daemon's
:mod:`monitor.daemon.runtime.estimation_watch` keeps and persists it per champion version).

One code path for the three tasks: the figure is accuracy for a classifier (binary or multiclass),
the MAE for regression (``figure_of``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm

from monitor.config import ModelConfig
from monitor.drift.estimation import Calibrator, MulticlassCalibrator, _accuracy_interval, _right
from monitor.drift.estimators import Estimator, fit_estimator
from monitor.drift.frames import labelled_rows
from monitor.drift.loss_estimation import LossEstimator, estimate_loss
from monitor.tasks import task_of



def figure_of(task: str) -> str:
    """The figure the estimate is judged on: the MAE for regression, accuracy for a classifier."""
    return task_of(task).primary_metric


@dataclass(frozen=True)
class LabelledEstimate:
    """The estimate on a window's labelled rows, with its band, and what those rows realised."""

    figure: str
    rows: int
    realised: float
    estimated: float
    band: tuple[float, float]

    @property
    def inside(self) -> bool:
        return self.band[0] - 1e-12 <= self.realised <= self.band[1] + 1e-12

    @property
    def error(self) -> float:
        """Realised minus estimated: positive when the estimate was pessimistic (accuracy) or, for
        the MAE, optimistic."""
        return self.realised - self.estimated

    def describe(self) -> str:
        side = "inside" if self.inside else "outside"
        return (f"realised {self.figure} {self.realised:.4f} {side} the estimate's band "
                f"[{self.band[0]:.4f}, {self.band[1]:.4f}] (estimated {self.estimated:.4f}) on {self.rows} labelled "
                "rows")

    def to_dict(self) -> dict[str, object]:
        return {"figure": self.figure, "rows": self.rows, "realised": self.realised, "estimated": self.estimated,
                "band": list(self.band), "inside": self.inside}


def _labelled_frame(frame: pd.DataFrame, model_cfg: ModelConfig) -> pd.DataFrame:
    if model_cfg.target not in frame.columns or model_cfg.score not in frame.columns:
        return frame.iloc[:0]
    score = pd.to_numeric(frame[model_cfg.score], errors="coerce")
    keep = (frame[model_cfg.target].notna() & np.isfinite(score.to_numpy(dtype="float64", na_value=np.nan))).to_numpy()
    return frame if bool(keep.all()) else frame[keep].reset_index(drop=True)


def labelled_estimate(estimator: Estimator | None, frame: pd.DataFrame, model_cfg: ModelConfig,
                      confidence: float = 0.95) -> LabelledEstimate | None:
    """The estimate of ``frame``'s labelled rows (with a finite score) and its band, beside what those
    rows realised; None without an estimator, without labelled rows, or for a multiclass window
    without its probabilities."""
    if estimator is None:
        return None
    rows = _labelled_frame(frame, model_cfg)
    if not len(rows):
        return None
    z = float(norm.ppf(0.5 + confidence / 2.0))
    if isinstance(estimator, LossEstimator):
        loss = estimate_loss(estimator, rows, confidence)
        if loss is None:
            return None
        y = pd.to_numeric(rows[model_cfg.target], errors="coerce").to_numpy("float64", na_value=np.nan)
        yhat = pd.to_numeric(rows[model_cfg.score], errors="coerce").to_numpy("float64", na_value=np.nan)
        err = np.abs(y - yhat)
        err = err[np.isfinite(err)]
        if not len(err):
            return None
        return LabelledEstimate("mae", len(err), float(err.mean()), loss.mae, loss.mae_ci)
    labelled = labelled_rows(rows, model_cfg, "labelled rows")
    if labelled is None or not len(labelled):
        return None
    realised = float((labelled.pred == labelled.y).mean())
    if isinstance(estimator, MulticlassCalibrator):
        if labelled.proba is None:
            return None
        calibrated = estimator(labelled.proba) if estimator.served is None else np.empty((0, labelled.proba.shape[1]))
        q = _right(estimator, calibrated, labelled.pred, labelled.score)
    elif isinstance(estimator, Calibrator):
        p = estimator(labelled.score)
        q = np.where(labelled.pred.astype(bool), p, 1.0 - p)
    else:
        return None
    band = _accuracy_interval(estimator, labelled.score, q, z)
    return LabelledEstimate("accuracy", len(q), realised, float(q.mean()), band)


def refit(model_cfg: ModelConfig, rows: pd.DataFrame) -> Estimator | None:
    """The task's estimator fitted on ``rows`` (a store window's labelled rows, as scored by the
    champion), exactly as on a reference; None when they cannot fit one (too few rows, one class)."""
    rows = _labelled_frame(rows, model_cfg)
    if not len(rows):
        return None
    return fit_estimator(model_cfg, rows, labelled_rows(rows, model_cfg, "recalibration rows"))

