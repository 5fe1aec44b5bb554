"""Output drift thresholds calibrated per model, from the reference's own bootstrap variability.

Evidently judges a model's score (and a multiclass model's served class and class probabilities)
against a fixed threshold, 0.1 for its distances (Wasserstein normed, Jensen-Shannon). That
threshold does not know the column: a confident classifier's scores sit at 0 and 1, so a window of
a few hundred stationary rows moves the share at each end by a few points, and the normed
Wasserstein distance (divided by a spread of about 0.5) reads 0.16-0.50 on data that did not
change (issue 34: text and image models flagged on every stationary window).

So the threshold of each output column is what the reference itself reaches by chance at the
live window's size: pairs of resamples of the reference sample's values (one as large as the
reference sample, at most :data:`MAX_REFERENCE_ROWS`, one as large as the window's sample), the
same stattest between them, and
the ``drift.output_drift_quantile`` (0.99) of :data:`RESAMPLES` such scores. The column's
threshold is the higher of that and Evidently's, so a column whose noise is below the fixed
threshold is judged as before, and a real shift (a positive rate from 0.5 to 0.8: a distance
many times the noise) is still flagged. Only distances are calibrated (higher is drift);
p-value tests (``ks``, chi-square, z: small references) are already calibrated against chance.

The thresholds are computed once per champion reference and window size: cached in
:attr:`monitor.drift.frames.PreparedReference.output_thresholds` by column, method and the window's
sample size rounded *down* to a power of sqrt(2) (a smaller sample is noisier, so the rounded
threshold errs high), so a steady stream of full windows reuses one figure per column.
"""
from __future__ import annotations

import math
from typing import Iterable, MutableMapping

import numpy as np
import pandas as pd

from monitor.drift.methods import NUMERIC, clean
from monitor.drift.runner import ColumnPlan, ColumnVerdict

#: The stattests whose score is a distance (drift when score >= threshold), which this calibrates.
DISTANCES = frozenset({"wasserstein", "jensenshannon", "psi", "kl_div", "hellinger", "ed", "TVD"})
RESAMPLES = 100   # pairs of resamples per column and size: 0.99 is then the second highest score
# The pseudo-reference's rows at most: beyond it the reference side adds little noise (at 5,000 rows
# against a window of 4,096 the threshold is ~20 % higher than at 20,000, and far below 0.1), and
# each resample costs its size.
MAX_REFERENCE_ROWS = 5000


def size_bucket(rows: int) -> int:
    """``rows`` rounded down to a power of sqrt(2) (at least 1): the cache's key for a window size."""
    if rows <= 1:
        return 1
    return max(1, int(math.floor(2 ** (math.floor(2 * math.log2(rows)) / 2))))


def null_threshold(values: pd.Series, kind: str, method: str, rows: int, quantile: float, seed: int) -> float | None:
    """The ``quantile`` of ``method``'s score between pairs of resamples of ``values`` (the
    reference's), of the reference's size and of ``rows``; None when Evidently has no such test
    or the reference has too few values."""
    from evidently.legacy.calculations.stattests.registry import get_stattest
    from evidently.legacy.core import ColumnType

    pool = clean(values).reset_index(drop=True)
    if len(pool) < 2 or rows < 1:
        return None
    feature_type = ColumnType.Numerical if kind == NUMERIC else ColumnType.Categorical
    try:
        test = get_stattest(pool, pool, feature_type, method)
    except Exception:  # an unknown name or a test for the other column type: keep Evidently's threshold
        return None
    rng = np.random.default_rng(seed)
    scores = []
    size = min(len(pool), MAX_REFERENCE_ROWS)
    for _ in range(RESAMPLES):
        reference = pool.iloc[rng.integers(0, len(pool), size=size)].reset_index(drop=True)
        current = pool.iloc[rng.integers(0, len(pool), size=rows)].reset_index(drop=True)
        score, _ = test.func(reference, current, feature_type, math.inf)
        if math.isfinite(score):
            scores.append(float(score))
    return float(np.quantile(scores, quantile)) if scores else None


def calibrate(verdicts: dict[str, ColumnVerdict], plans: Iterable[ColumnPlan | str | None],
              reference: pd.DataFrame, current: pd.DataFrame, cache: MutableMapping[tuple[str, str, int], float | None],
              quantile: float | None, seed: int = 0) -> dict[str, ColumnVerdict]:
    """``verdicts`` with each planned output column's distance judged against its calibrated
    threshold (module docstring): the higher of Evidently's and the reference's own ``quantile``
    at the window's sample size. ``reference``/``current``: the samples the verdicts were made on;
    ``cache``: the champion reference's thresholds. ``quantile`` None: Evidently's thresholds."""
    if quantile is None:
        return verdicts
    out = dict(verdicts)
    for plan in plans:
        if not isinstance(plan, ColumnPlan) or plan.name not in out or plan.name not in reference.columns:
            continue
        verdict = out[plan.name]
        if verdict.method not in DISTANCES or not math.isfinite(verdict.score):
            continue
        rows = size_bucket(len(clean(current[plan.name]))) if plan.name in current.columns else 0
        key = (plan.name, verdict.method, rows)
        if key not in cache:
            cache[key] = null_threshold(reference[plan.name], plan.kind, verdict.method, rows, quantile,
                                        seed=seed + rows)
        noise = cache[key]
        if noise is None or noise <= verdict.threshold:
            continue
        out[plan.name] = ColumnVerdict(verdict.method, verdict.score, noise, verdict.score >= noise)
    return out


__all__ = ["DISTANCES", "RESAMPLES", "calibrate", "null_threshold", "size_bucket"]
