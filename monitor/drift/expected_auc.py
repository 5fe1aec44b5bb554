"""ROC AUC expected from calibrated probabilities, before labels arrive, and its band.

Every row counts as a positive with weight ``p_i`` and as a negative with weight ``1 - p_i``,
ranked by its raw score (the weighted Mann-Whitney statistic); the band is Hanley & McNeil's (1982)
variance at the expected class counts. Binary CBPE (:mod:`monitor.drift.estimation`) ranks by the
score, multiclass CBPE (:mod:`monitor.drift.multiclass_estimation`) by each class's probability.
"""
from __future__ import annotations

import math

import numpy as np

EXACT_AUC_ROWS = 1 << 16   # above this many rows, scores are bucketed into AUC_BUCKETS instead of sorted
AUC_BUCKETS = 1 << 20


def weighted_auc(scores: np.ndarray, p: np.ndarray, buckets: int = AUC_BUCKETS,
                 exact_rows: int = EXACT_AUC_ROWS) -> float | None:
    """ROC AUC with row i a positive of weight p_i and a negative of weight 1 - p_i (ties count one half).

    Sorting a million scores costs about 0.3 s; above ``EXACT_AUC_ROWS`` rows the scores go into
    2^20 equal-width buckets (one pass, ``bincount``) and rows sharing a bucket count as ties, which
    moves the AUC by at most the weight of pairs closer than range / 2^20 (negligible)."""
    pos_total, neg_total = float(p.sum()), float((1.0 - p).sum())
    if pos_total <= 0 or neg_total <= 0:
        return None
    if len(scores) > exact_rows:
        lo, hi = float(scores.min()), float(scores.max())
        span = hi - lo if hi > lo else 1.0
        idx = np.minimum(((scores - lo) * (buckets / span)).astype(np.int64), buckets - 1)
        g1 = np.bincount(idx, weights=p, minlength=buckets)
        g0 = np.bincount(idx, minlength=buckets) - g1
    else:
        order = np.argsort(scores, kind="stable")
        s, w1 = scores[order], p[order]
        starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])      # groups of tied scores, ascending
        g1 = np.add.reduceat(w1, starts)
        g0 = np.add.reduceat(1.0 - w1, starts)
    below = np.cumsum(g0) - g0                                      # negative weight strictly below each group
    return float((g1 * (below + 0.5 * g0)).sum() / (pos_total * neg_total))


def hanley_mcneil_variance(auc: float, positives: float, negatives: float) -> float | None:
    if positives < 1 or negatives < 1:
        return None
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    var = (auc * (1 - auc) + (positives - 1) * (q1 - auc * auc) + (negatives - 1) * (q2 - auc * auc)) \
        / (positives * negatives)
    return max(var, 0.0)


def hanley_mcneil_interval(auc: float, positives: float, negatives: float, z: float) -> tuple[float, float] | None:
    var = hanley_mcneil_variance(auc, positives, negatives)
    if var is None:
        return None
    half = z * math.sqrt(var)
    return max(0.0, auc - half), min(1.0, auc + half)
