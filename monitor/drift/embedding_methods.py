"""The four two-sample statistics an embedding feature can be tested with, on projected rows.

Each takes the reference's and the window's rows already sampled and projected (``(m, k)`` and
``(n, k)`` float arrays, see :mod:`monitor.drift.embedding`) and a seeded generator, and returns a
:class:`Statistic`. They are the candidates issue 21 named; ``bench/bench_embedding_drift.py``
measures them side by side and ``drift.embedding_method`` picks one (default: the measured best).

==============  ===============================================  ==================  ===========
method          what it computes                                 score               drifted
==============  ===============================================  ==================  ===========
mmd             RBF-kernel MMD² (median heuristic bandwidth on   permutation         p < 0.05
                the pooled rows), permutation test               p-value
classifier      Evidently's default: a logistic domain           ROC AUC on the      AUC >= 0.55
                classifier on half the rows, AUC on the other     held-out half
components      two-sample K-S per PCA component,                smallest BH-        p < 0.05
                Benjamini-Hochberg over the components           adjusted p-value
reconstruction  NannyML's: mean PCA reconstruction error of the  |z| of the mean    |z| >= 3
                window against the reference's (65 % variance)   against its band
==============  ===============================================  ==================  ===========
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MMD, CLASSIFIER, COMPONENTS, RECONSTRUCTION = "mmd", "classifier", "components", "reconstruction"
METHODS = (MMD, CLASSIFIER, COMPONENTS, RECONSTRUCTION)
# Methods whose score is a p-value (drifted when score < threshold); the others drift when score >= threshold.
P_VALUE_METHODS = frozenset({MMD, COMPONENTS})
DEFAULT_THRESHOLDS = {MMD: 0.05, CLASSIFIER: 0.55, COMPONENTS: 0.05, RECONSTRUCTION: 3.0}
PERMUTATIONS = 200          # p-value resolution 1/201: enough to tell p < 0.05 apart
BANDWIDTH_ROWS = 1000       # rows of the pooled sample the median heuristic looks at
RECONSTRUCTION_VARIANCE = 0.65  # NannyML's default share of variance the kept components explain


@dataclass(frozen=True)
class Statistic:
    """``score`` is compared with the threshold (module table); ``statistic`` is the raw figure
    people read (MMD², the AUC, the share of drifted components, the error ratio)."""

    score: float
    statistic: float


def drifted(method: str, score: float, threshold: float) -> bool:
    return score < threshold if method in P_VALUE_METHODS else score >= threshold


def mmd(ref: np.ndarray, cur: np.ndarray, rng: np.random.Generator, permutations: int = PERMUTATIONS) -> Statistic:
    """Biased MMD² with an RBF kernel, its p-value by permuting the side labels of the pooled rows.

    All permutations cost one matrix product: with ``W`` the (rows x permutations) matrix of side
    weights (+1/m reference, -1/n window), the statistics are the column sums of ``W * (K @ W)``.
    The bandwidth (median squared distance) is computed on the pooled rows, so it is the same under
    every permutation and the test stays exact. Memory: the (m+n)² kernel, 128 MB at 2 x 2,000 rows."""
    z = np.vstack([ref, cur]).astype(np.float64, copy=False)
    m, total = len(ref), len(ref) + len(cur)
    sq = np.einsum("ij,ij->i", z, z)
    sub = rng.choice(total, size=min(total, BANDWIDTH_ROWS), replace=False)
    d2_sub = sq[sub][:, None] + sq[sub][None, :] - 2.0 * (z[sub] @ z[sub].T)
    median = float(np.median(d2_sub[np.triu_indices(len(sub), k=1)]))
    gamma = 1.0 / median if median > 0 else 1.0
    kernel = z @ z.T
    kernel *= 2.0
    kernel -= sq[:, None]
    kernel -= sq[None, :]
    np.minimum(kernel, 0.0, out=kernel)   # -|x-y|², rounding kept below zero
    kernel *= gamma
    np.exp(kernel, out=kernel)
    sides = np.zeros((total, permutations + 1))
    base = np.r_[np.full(m, 1.0 / m), np.full(total - m, -1.0 / (total - m))]
    sides[:, 0] = base
    for p in range(1, permutations + 1):
        sides[:, p] = base[rng.permutation(total)]
    stats = np.einsum("ip,ip->p", sides, kernel @ sides)
    observed = float(stats[0])
    p_value = (1.0 + float(np.sum(stats[1:] >= observed))) / (permutations + 1.0)
    return Statistic(p_value, max(observed, 0.0))


def classifier(ref: np.ndarray, cur: np.ndarray, rng: np.random.Generator) -> Statistic:
    """Evidently's ``ModelDriftMethod``: a classifier told to separate the reference from the window,
    trained on half of each side and scored by ROC AUC on the other half (0.5: inseparable).
    Logistic regression (lbfgs, standardised inputs) stands in for Evidently's SGD: same model
    family, deterministic, no learning-rate tuning."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    x = np.vstack([ref, cur])
    y = np.r_[np.ones(len(ref)), np.zeros(len(cur))]
    train = np.zeros(len(x), dtype=bool)
    for side in (np.flatnonzero(y == 1), np.flatnonzero(y == 0)):
        train[rng.permutation(side)[: len(side) // 2]] = True
    mean, std = x[train].mean(axis=0), x[train].std(axis=0)
    std[std == 0] = 1.0
    x = (x - mean) / std
    model = LogisticRegression(C=1.0, max_iter=500).fit(x[train], y[train])
    auc = float(roc_auc_score(y[~train], model.decision_function(x[~train])))
    return Statistic(auc, auc)


def components(ref: np.ndarray, cur: np.ndarray, alpha: float) -> Statistic:
    """Two-sample K-S on every component; Benjamini-Hochberg across them. The score is the smallest
    adjusted p-value (so "drifted" = at least one component drifted, with the family-wise error at
    ``alpha`` when nothing moved); the statistic is the share of components drifted at ``alpha``."""
    from scipy.stats import false_discovery_control, ks_2samp
    p = np.asarray(ks_2samp(ref, cur, axis=0).pvalue, dtype=np.float64).reshape(-1)
    adjusted = false_discovery_control(p, method="bh")
    return Statistic(float(adjusted.min()), float(np.mean(adjusted < alpha)))


def reconstruction(ref_errors: np.ndarray, cur_errors: np.ndarray) -> Statistic:
    """NannyML's data reconstruction drift: the window's mean reconstruction error against the
    reference's, in standard errors of the difference of the two means (``|z|``; NannyML draws
    its band at 3 standard deviations of chunk means). The statistic is the ratio of the means."""
    m, n = len(ref_errors), len(cur_errors)
    ref_mean, cur_mean = float(ref_errors.mean()), float(cur_errors.mean())
    se = float(np.sqrt(ref_errors.var(ddof=1) / m + cur_errors.var(ddof=1) / n))
    z = abs(cur_mean - ref_mean) / se if se > 0 else (0.0 if cur_mean == ref_mean else np.inf)
    return Statistic(float(z), cur_mean / ref_mean if ref_mean > 0 else float("nan"))


def reconstruction_components(explained_ratio: np.ndarray) -> int:
    """How many leading components explain ``RECONSTRUCTION_VARIANCE`` of the variance (all of
    those fitted when they explain less)."""
    reached = np.flatnonzero(np.cumsum(explained_ratio) >= RECONSTRUCTION_VARIANCE)
    return int(reached[0]) + 1 if len(reached) else len(explained_ratio)


def reconstruction_errors(centred: np.ndarray, projected: np.ndarray, keep: int) -> np.ndarray:
    """Per row: the distance between the row and its reconstruction from the first ``keep``
    components (orthonormal, so ||x||² - ||x projected||²)."""
    total = np.einsum("ij,ij->i", centred, centred, dtype=np.float64)
    kept = np.einsum("ij,ij->i", projected[:, :keep], projected[:, :keep], dtype=np.float64)
    return np.sqrt(np.maximum(total - kept, 0.0))
