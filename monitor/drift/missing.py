"""A feature that goes missing is drift: its share of missing values against the reference's.

Evidently's drift tests (and so a feature's value test here) drop missing values before they
compare distributions: a feature whose upstream broke and now arrives ``null`` in every row had no
values to test and was listed as *not tested*, and one that arrives missing in 40 % of rows looked
stable as long as the values that did arrive were. The model meanwhile imputes the training mean
for the missing values and its accuracy falls. So each feature's missing share in the window is
compared with the reference's: when it moved by ``drift.missing_share_change`` (0.1) or more and a
Fisher's exact test of the counts rules out chance (p below :data:`ALPHA`; a few rows never flip it), the
feature is drifted with method ``missing_share``; its score is the share's change, its threshold
``drift.missing_share_change``, and ``details`` keep both shares, the p-value and the value test's
own verdict (``values``). It counts in the drift share like any drifted feature, and shows in
``driftloop_model_feature_drift`` and the Evidently report's column list.
"""
from __future__ import annotations

from monitor.drift.result import FeatureDrift

#: The two-proportion test's level: a share change must be this unlikely under "nothing changed".
ALPHA = 0.001
METHOD = "missing_share"


def share_test(reference: float, reference_rows: int, current: float, current_rows: int) -> float:
    """The two-sided p-value of Fisher's exact test of the missing counts (the shares times the rows);
    1.0 with no rows. Exact, so one missing value in ten rows against none in 5,000 proves nothing
    (a z test on the pooled share called one in ten p 1e-110)."""
    if reference_rows <= 0 or current_rows <= 0:
        return 1.0
    from scipy.stats import fisher_exact
    a, b = round(reference * reference_rows), round(current * current_rows)
    return float(fisher_exact([[a, reference_rows - a], [b, current_rows - b]]).pvalue)


def missing_share_drift(feature: FeatureDrift, reference: float | None, reference_rows: int, current: float | None,
                        current_rows: int, change: float) -> FeatureDrift:
    """``feature`` as drifted by its missing share (module doc) when the share moved by ``change`` or
    more and provably; ``feature`` itself otherwise (and with ``change`` 0: off)."""
    if not change or reference is None or current is None:
        return feature
    moved = abs(current - reference)
    if moved < change - 1e-12:
        return feature
    p = share_test(reference, reference_rows, current, current_rows)
    if p >= ALPHA:
        return feature
    values = {"method": feature.method, "score": feature.score, "threshold": feature.threshold,
              "drifted": feature.drifted, "skipped": feature.skipped}
    return FeatureDrift(feature.name, METHOD, float(moved), float(change), True,
                        details={"reference_missing_ratio": float(reference), "current_missing_ratio": float(current),
                                 "p_value": p, "values": values, **({"value_details": feature.details}
                                                                    if feature.details else {})})
