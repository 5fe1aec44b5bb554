"""Labels chosen by the score: the bar a window's realised figures are judged against.

Many services label only some of what they serve, and not at random: a fraud team reviews the
transactions the model flagged, a moderation queue sees the posts scored above a line, a credit
desk learns the outcome of the loans it granted. The labelled rows are then the rows the model
scored high (plus, often, a small random audit), and what they realise is not what the window
would realise: a ROC AUC over rows all scored 0.5 or more is a ranking inside a narrow band of
scores, 5-6 points below the model's ROC AUC over every row although nothing has changed. Judged
against the champion's level on all rows, such a stream opens a performance incident on its first
labelled window and retrains for ever (``bench/bench_outside.py reviewed_ctrl``).

What would the labelled rows realise if nothing had changed? The label-free estimate says
(CBPE, direct loss estimation: :mod:`monitor.drift.check_figures`): each figure estimated on the
labelled rows and on every row of the same period, with the same estimator. When the labelled rows
are a chosen subset (their scores, or a classifier's served classes, differ from the unlabelled
rows' of the same period: :func:`label_selection`), the bar of each realised figure moves by the
difference, ``shift = estimated on the labelled rows - estimated on all rows``: a concept change
still shows as the labelled rows realising less than they were expected to, while the choice of
rows alone does not.

The period is the window's rows up to the newest labelled row: rows after it have no label yet
because labels arrive late, not because someone chose. Labels missing at random (a 20 % sample)
leave the two groups alike and nothing moves. The test is two-sample Kolmogorov-Smirnov on the
score and, for a classifier, a chi-square on the served classes; a difference counts when it is
significant (p < ``ALPHA``) and material (a KS distance or a total-variation distance of at least
``MIN_DISTANCE``), so a large window's trivial differences do not move a bar.

Only realised figures move (the policy's labelled judgements, ``alerts.rules`` on the figures
estimated here, improvement retrains); the label-free estimate of the whole window is judged
against the level as it is, and so is the served positive rate (every row). An attainable level
(measured on labelled rows chosen the same way) does not move. Pure: no I/O.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import chi2_contingency, ks_2samp

from monitor.config import ModelConfig
from monitor.drift.check_figures import estimator_figures
from monitor.drift.estimators import Estimator
from monitor.drift.frames import Scored, scored_rows

ALPHA = 1e-3          # significance of the difference between labelled and unlabelled rows
MIN_DISTANCE = 0.1    # ... and its least size: KS distance of the scores, or total variation of the classes
MIN_GROUP_ROWS = 50   # fewer labelled, or unlabelled, rows in the period: nothing is tested


@dataclass(frozen=True)
class LabelSelection:
    """How the window's labelled rows compare with its unlabelled rows of the same period, and, when
    they were chosen, how far each realised figure's bar moves (``shift``)."""

    labelled_rows: int
    unlabelled_rows: int            # rows of the period (up to the newest labelled row) with no label
    score_distance: float           # KS distance of the scores (labelled vs unlabelled)
    score_p_value: float
    class_distance: float | None = None   # classifiers: total variation between the served classes
    class_p_value: float | None = None
    chosen: bool = False            # a significant and material difference: the bars move
    expected_labelled: dict[str, float] = field(default_factory=dict)   # estimated on the labelled rows
    expected_all: dict[str, float] = field(default_factory=dict)        # ... and on every row of the period

    @property
    def shift(self) -> dict[str, float]:
        """How far each realised figure's bar moves: estimated on the labelled rows minus estimated
        on all rows of the period (nothing when the labels were not chosen)."""
        if not self.chosen:
            return {}
        return {k: self.expected_labelled[k] - self.expected_all[k] for k in self.expected_labelled
                if k in self.expected_all}

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "shift": self.shift}


def label_selection(current: pd.DataFrame, model_cfg: ModelConfig, estimator: Estimator | None,
                    confidence: float = 0.95) -> LabelSelection | None:
    """Compare the window's labelled rows with its unlabelled rows of the same period (module
    docstring); None when there is nothing to compare (no target or ``ts`` column, every row of the
    period labelled, or fewer than ``MIN_GROUP_ROWS`` rows on a side)."""
    target, score_col = model_cfg.target, model_cfg.score
    if target not in current.columns or score_col not in current.columns or not len(current):
        return None
    score = pd.to_numeric(current[score_col], errors="coerce").to_numpy("float64", na_value=np.nan)
    has_label = current[target].notna().to_numpy() & np.isfinite(score)
    if not has_label.any():
        return None
    if "ts" not in current.columns:  # late labels cannot be told from unchosen rows
        return None
    ts = current["ts"]
    newest = ts[has_label].max()
    if pd.isna(newest):
        return None
    in_period = np.isfinite(score) & (ts <= newest).to_numpy()
    labelled, unlabelled = has_label & in_period, ~has_label & in_period
    if labelled.sum() < MIN_GROUP_ROWS or unlabelled.sum() < MIN_GROUP_ROWS:
        return None
    ks = ks_2samp(score[labelled], score[unlabelled])
    d, p = float(ks.statistic), float(ks.pvalue)
    class_d = class_p = None
    period = current[in_period].reset_index(drop=True)
    scored = scored_rows(period, model_cfg, "current window")
    is_labelled = has_label[in_period]
    if model_cfg.kind.classifier and scored is not None and len(scored.pred) == len(is_labelled):
        class_d, class_p = _class_difference(scored.pred, is_labelled)
    tests = [(d, p)] + ([(class_d, class_p)] if class_d is not None and class_p is not None else [])
    alpha = ALPHA / len(tests)  # Bonferroni over the two tests
    chosen = any(dist >= MIN_DISTANCE and pv < alpha for dist, pv in tests)
    on_labelled: dict[str, float] = {}
    on_all: dict[str, float] = {}
    if chosen and estimator is not None:
        on_labelled = _expected(estimator, period[is_labelled].reset_index(drop=True),
                                _subset(scored, is_labelled), confidence)
        on_all = _expected(estimator, period, scored, confidence)
    return LabelSelection(int(labelled.sum()), int(unlabelled.sum()), d, p, class_d, class_p, chosen,
                          on_labelled, on_all)


def _subset(scored: Scored | None, rows: np.ndarray) -> Scored | None:
    """The scored rows of the period's labelled rows (every row of the period has a finite score,
    so ``scored`` and the period are row for row)."""
    if scored is None or len(scored.score) != len(rows):
        return None
    return Scored(scored.score[rows], scored.pred[rows], None if scored.proba is None else scored.proba[rows])


def _class_difference(pred: np.ndarray, is_labelled: np.ndarray) -> tuple[float | None, float | None]:
    """Total variation between the served classes of labelled and unlabelled rows, and the
    chi-square test's p-value; None for one class served."""
    classes, codes = np.unique(pred, return_inverse=True)
    if len(classes) < 2:
        return None, None
    table = np.vstack([np.bincount(codes[is_labelled], minlength=len(classes)),
                       np.bincount(codes[~is_labelled], minlength=len(classes))]).astype(float)
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] < 2:
        return None, None
    shares = table / table.sum(axis=1, keepdims=True)
    tv = 0.5 * float(np.abs(shares[0] - shares[1]).sum())
    return tv, float(chi2_contingency(table, correction=False)[1])


def _expected(estimator: Estimator, frame: pd.DataFrame, scored: Scored | None,
              confidence: float) -> dict[str, float]:
    """The estimator's figures on ``frame``'s rows (:func:`monitor.drift.check_figures.estimator_figures`)
    that the default pair and ``alerts.rules`` judge on labelled rows, finite ones only."""
    figures = estimator_figures(estimator, frame, scored, confidence)
    return {k: float(v) for k, v in figures.items()
            if k != "rows" and not k.endswith("_ci") and v is not None and math.isfinite(v)}
