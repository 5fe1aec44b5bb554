"""Per-group statistics in a few ``np.bincount`` passes: what :mod:`monitor.drift.segments` needs
for every value of a segment at once, with no per-value mask or sort over the rows.

A segment's values are integer codes ``0..k-1``; each figure below is one or two passes over the
rows whatever ``k`` is, so twenty segments of a million-row window cost twenty such passes, not
twenty times the values:

- :func:`grouped_labelled`: rows, labelled rows, correct ones, positives, hits and ROC AUC per
  value from *one* integer ``bincount``: each row's class (:func:`row_classes`, once per check)
  is its score bucket, label and correctness (or "unlabelled"), and ``code * S + class`` counts
  them all. Scores are cut into ``AUC_BUCKETS`` quantile buckets of the labelled scores; the
  Mann-Whitney statistic is read off the cumulative counts per bucket, rows sharing a bucket
  counting one half as ties do. Its error against the exact AUC is at most the share of
  positive-negative pairs that fall in one bucket (about 1/B: < 0.001), and every labelled row
  counts;
- :func:`grouped_errors`: a regression model's MAE per value and its t interval, from three
  weighted ``bincount`` passes (rows, sum and sum of squares of the absolute errors);
- :func:`grouped_estimate`: CBPE's expected accuracy per value and its band (the Bernoulli term
  and the calibration term of :mod:`monitor.drift.estimation`, per value);
- :func:`grouped_drift_share`: per value, the share of features whose binned Jensen-Shannon
  distance to the reference exceeds the threshold by more than the distance two samples of one
  distribution would show (the noise floor): a cheap stat on the check's drift sample, where a
  full Evidently run per value would cost seconds per segment.
"""
from __future__ import annotations

import numpy as np
from scipy.stats import norm, t

AUC_BUCKETS = 2048
DRIFT_BINS = 10          # reference deciles of a numeric feature; top categories + rest for a categorical one
DEFAULT_DRIFT_THRESHOLD = 0.1  # Evidently's default for its distances (Wasserstein, Jensen-Shannon)


def score_buckets(scores: np.ndarray) -> np.ndarray:
    """Each score's quantile bucket among ``scores`` (0..AUC_BUCKETS-1), computed once per check."""
    if len(scores) == 0:
        return np.zeros(0, dtype=np.int64)
    edges = np.unique(np.quantile(scores, np.linspace(0, 1, AUC_BUCKETS + 1)[1:-1]))
    return np.searchsorted(edges, scores, side="right").astype(np.int64)


def row_classes(labelled: np.ndarray, y: np.ndarray, correct: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, int]:
    """Each row's class for :func:`grouped_labelled`, and the number of classes S: a labelled row's
    ``(bucket * 2 + label) * 2 + correct``, an unlabelled row's ``S - 1``."""
    buckets = score_buckets(scores)
    b = int(buckets.max()) + 1 if len(buckets) else 1
    classes = np.full(len(labelled), 4 * b, dtype=np.int64)
    classes[labelled] = (buckets * 2 + y.astype(np.int64)) * 2 + correct.astype(np.int64)
    return classes, 4 * b + 1


def grouped_labelled(codes: np.ndarray, k: int, classes: np.ndarray, s: int) -> dict[str, np.ndarray]:
    """Per code: ``rows``, ``labelled``, ``correct``, ``positives``, ``hits`` and ``roc_auc`` (NaN
    where a value lacks one of the classes), from one ``bincount`` (module docstring)."""
    counts = np.bincount(codes * s + classes, minlength=k * s).reshape(k, s)
    rows = counts.sum(axis=1)
    cells = counts[:, : s - 1].reshape(k, -1, 2, 2).astype(np.float64)  # (value, bucket, label, correct)
    pos, neg = cells[:, :, 1, :].sum(axis=2), cells[:, :, 0, :].sum(axis=2)
    below = np.cumsum(neg, axis=1) - neg                  # negatives in lower buckets
    p, n = pos.sum(axis=1), neg.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        auc = np.where((p > 0) & (n > 0), (pos * (below + 0.5 * neg)).sum(axis=1) / (p * n), np.nan)
    return {"rows": rows, "labelled": p + n, "correct": cells[:, :, :, 1].sum(axis=(1, 2)), "positives": p,
            "hits": cells[:, :, 1, 1].sum(axis=1), "roc_auc": auc}


def grouped_errors(codes: np.ndarray, k: int, errors: np.ndarray,
                   confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Mean of ``errors`` per code (NaN errors: unlabelled rows, left out) and the half-width of its
    t interval (as :func:`monitor.taskstats.regression_performance` gives the MAE's); NaN where a
    value has no labelled row, and a NaN half-width with one."""
    ok = np.isfinite(errors)
    c, e = codes[ok], errors[ok]
    n = np.bincount(c, minlength=k).astype(np.float64)
    total = np.bincount(c, weights=e, minlength=k)
    squares = np.bincount(c, weights=e * e, minlength=k)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / n
        var = np.maximum(squares - n * mean * mean, 0.0) / (n - 1)
        half = t.ppf(0.5 + confidence / 2.0, np.maximum(n - 1, 1)) * np.sqrt(var / n)
    return mean, np.where(n >= 2, half, np.nan)


def grouped_estimate(codes: np.ndarray, k: int, q: np.ndarray, q_var: np.ndarray, bins: np.ndarray,
                     reference_counts: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Expected accuracy per code and the half-width of its band. ``q``: each scored row's chance
    of being right, ``q_var`` its ``q (1 - q)``; ``bins``: its reference-score bin;
    ``reference_counts``: reference rows per bin."""
    nb = len(reference_counts)
    key = codes * nb + bins
    n_cb = np.bincount(key, minlength=k * nb).reshape(k, nb).astype(np.float64)
    q_cb = np.bincount(key, weights=q, minlength=k * nb).reshape(k, nb)
    n = n_cb.sum(axis=1)
    var_q = np.bincount(codes, weights=q_var, minlength=k)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = q_cb.sum(axis=1) / n
        qb = q_cb / np.maximum(n_cb, 1.0)
        share = n_cb / n[:, None]
        calibration = (share * share * qb * (1.0 - qb) / np.maximum(reference_counts, 1)).sum(axis=1)
        half = float(norm.ppf(0.5 + confidence / 2.0)) * np.sqrt(var_q / (n * n) + calibration)
    return acc, half


def bin_edges(values: np.ndarray) -> np.ndarray:
    """Inner decile edges of a numeric reference column (NaN left out)."""
    v = values[np.isfinite(values)]
    if not len(v):
        return np.zeros(0)
    return np.unique(np.quantile(v, np.linspace(0, 1, DRIFT_BINS + 1)[1:-1]))


def js_distance(p: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Jensen-Shannon distance (natural log, as scipy's) between the rows of ``p`` and the
    distribution ``r`` (or rows of ``r``); counts in, distributions out."""
    p = p / np.maximum(p.sum(axis=-1, keepdims=True), 1e-300)
    r = r / np.maximum(r.sum(axis=-1, keepdims=True), 1e-300)
    m = 0.5 * (p + r)
    with np.errstate(invalid="ignore", divide="ignore"):
        kl_p = np.where(p > 0, p * np.log(p / m), 0.0).sum(axis=-1)
        kl_r = np.where(r > 0, r * np.log(r / m), 0.0).sum(axis=-1)
    return np.sqrt(np.maximum(0.5 * (kl_p + kl_r), 0.0))


def noise_floor(bins: int, n1: np.ndarray | float, n2: np.ndarray | float) -> np.ndarray:
    """The Jensen-Shannon distance two samples of one distribution show: about
    ``sqrt((bins - 1) / 8 * (1/n1 + 1/n2))`` (the same floor monitor.drift.evaluate warns about)."""
    with np.errstate(divide="ignore"):
        return np.sqrt((bins - 1) / 8.0 * (1.0 / np.asarray(n1, dtype=np.float64)
                                           + 1.0 / np.asarray(n2, dtype=np.float64)))


def grouped_drift_share(codes: np.ndarray, k: int, binned: np.ndarray, offsets: np.ndarray, widths: np.ndarray,
                        reference: np.ndarray, threshold: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Per code: the share of features whose distribution within the value drifted from the
    reference, and the rows it rests on. ``binned``: (rows, features) bins of the drift sample,
    each feature's bins shifted by its ``offsets`` entry so all share one axis of ``sum(widths)``
    cells (-1: no value); ``reference``: (k, cells) reference counts per value (its own reference
    rows, or the whole reference). One ``bincount`` for all features."""
    limit = threshold or DEFAULT_DRIFT_THRESHOLD
    cells = int(widths.sum())
    rows = np.bincount(codes, minlength=k).astype(np.float64)
    ok = binned >= 0
    key = (codes[:, None] * cells + binned)[ok]
    counts = np.bincount(key, minlength=k * cells).reshape(k, cells).astype(np.float64)
    drifted = np.zeros(k)
    tested = np.zeros(k)
    for start, width in zip(offsets, widths):
        cur, ref = counts[:, start:start + width], reference[:, start:start + width]
        n_cur, n_ref = cur.sum(axis=1), ref.sum(axis=1)
        usable = (n_cur > 0) & (n_ref > 0)
        drifted += usable & (js_distance(cur, ref) - noise_floor(int(width), n_cur, n_ref) >= limit)
        tested += usable
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(tested > 0, drifted / tested, np.nan), rows
