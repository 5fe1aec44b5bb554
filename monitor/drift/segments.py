"""Per-segment performance: the window cut by ``model.segments``, so a drop in one slice (one
region, the night hours) is not averaged away by the aggregate.

A segment is a categorical feature or a time bucket of the prediction's ``ts`` (``hour_of_day``
0-23 UTC, ``day_of_week`` mon-sun). A categorical segment keeps its ``model.segment_top_k``
values with the most rows in the window and pools the rest as ``other``, so no feature can
explode the metric series; time buckets are bounded already (24 and 7 values). Missing values
are the value ``missing``.

For each value: rows; labelled rows; accuracy and recall with their Wilson intervals and ROC AUC
of the labelled rows; accuracy estimated from the scores alone (CBPE, with its band) on all its
rows; the share of features that drifted within it (on the check's drift sample); and the value's
accuracy and recall on the champion's reference (categorical segments; the reference has no
prediction times). A value is *judged* when it has ``drift.segment_min_labels`` labelled rows;
its drift share needs as many rows in the drift sample.

Per task (:mod:`monitor.tasks`): a binary model has all of the above; a multiclass model its
accuracy (recall, ROC AUC and the estimated accuracy are a binary model's and are left out); a
regression model the MAE of the predicted value with its t interval, and its reference MAE, in
place of accuracy (the drift share and row counts as for every task).

Cost: one hash pass (``pd.factorize``) per categorical segment, one integer pass for both time
buckets, then a handful of ``np.bincount`` passes per segment (:mod:`monitor.drift.grouped`);
nothing loops over values on the rows, and nothing sorts them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from monitor.config import TIME_SEGMENTS, DriftConfig, ModelConfig
from monitor.drift.calibration import Calibrator
from monitor.drift.frames import factorized, served_labels
from monitor.drift.grouped import grouped_drift_share, grouped_errors, grouped_estimate, grouped_labelled, row_classes
from monitor.drift.segment_reference import MISSING, OTHER, ReferenceSegments
from monitor.stats import wilson_interval

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
__all__ = ["OTHER", "MISSING", "DAYS", "SegmentPerformance", "ReferenceSegments", "segment_codes",
           "segment_performance"]


@dataclass(frozen=True)
class SegmentPerformance:
    segment: str                  # "region", "hour_of_day"
    value: str                    # "apac", "2", "other"
    rows: int
    labelled_rows: int
    accuracy: float | None
    accuracy_ci: tuple[float, float] | None
    recall: float | None
    roc_auc: float | None
    reference_accuracy: float | None  # this value's accuracy on the reference sample
    judged: bool                  # labelled_rows >= drift.segment_min_labels
    recall_ci: tuple[float, float] | None = None
    reference_recall: float | None = None
    estimated_accuracy: float | None = None      # CBPE on all the value's scored rows
    estimated_accuracy_ci: tuple[float, float] | None = None
    drift_share: float | None = None             # share of features drifted within the value (drift sample)
    drift_rows: int = 0                          # the value's rows in the drift sample
    mae: float | None = None                     # regression: mean absolute error of the labelled rows ...
    mae_ci: tuple[float, float] | None = None    # ... its t interval (drift.confidence)
    reference_mae: float | None = None           # ... and the value's MAE on the reference sample

    @property
    def label(self) -> str:
        """The ``segment`` label of its metric series: ``hour_of_day=2``."""
        return f"{self.segment}={self.value}"

    def to_dict(self) -> dict[str, Any]:
        def num(x: float | None) -> float | None:
            return None if x is None or not math.isfinite(x) else float(x)

        def pair(ci: tuple[float, float] | None) -> list[float | None] | None:
            return None if ci is None else [num(ci[0]), num(ci[1])]
        return {"segment": self.segment, "value": self.value, "rows": self.rows, "labelled_rows": self.labelled_rows,
                "accuracy": num(self.accuracy), "accuracy_ci": pair(self.accuracy_ci),
                "recall": num(self.recall), "recall_ci": pair(self.recall_ci), "roc_auc": num(self.roc_auc),
                "reference_accuracy": num(self.reference_accuracy), "reference_recall": num(self.reference_recall),
                "estimated_accuracy": num(self.estimated_accuracy),
                "estimated_accuracy_ci": pair(self.estimated_accuracy_ci),
                "drift_share": num(self.drift_share), "drift_rows": self.drift_rows, "judged": self.judged,
                "mae": num(self.mae), "mae_ci": pair(self.mae_ci), "reference_mae": num(self.reference_mae)}


def _time_parts(frame: pd.DataFrame) -> np.ndarray | None:
    """Whole hours since the epoch of each row's ``ts`` (UTC), one integer pass for both buckets."""
    if "ts" not in frame.columns:
        return None
    ts = frame["ts"]
    if not isinstance(ts.dtype, pd.DatetimeTZDtype) and not pd.api.types.is_datetime64_dtype(ts.dtype):
        ts = pd.to_datetime(ts, utc=True)
    ns = ts.to_numpy(dtype="datetime64[ns]").view(np.int64)
    return ns // 3_600_000_000_000


def segment_codes(frame: pd.DataFrame, segment: str, hours: np.ndarray | None = None,
                  cache: dict[str, Any] | None = None) -> tuple[np.ndarray, list[str]] | None:
    """Each row's value of ``segment`` as an integer code, and the values' names; None when the
    frame cannot say (no ``ts`` for a time bucket). ``hours``: :func:`_time_parts`, when known;
    ``cache``: the check's factorisations (:func:`monitor.drift.frames.factorized`)."""
    if segment in TIME_SEGMENTS:
        hours = _time_parts(frame) if hours is None else hours
        if hours is None:
            return None
        if segment == "hour_of_day":
            return hours % 24, [str(h) for h in range(24)]
        return (hours // 24 + 3) % 7, list(DAYS)   # 1970-01-01 was a Thursday
    if segment not in frame.columns:
        return None
    codes, uniques = factorized(frame, segment, cache)
    names = [str(u) for u in uniques]
    if (codes < 0).any():
        codes = np.where(codes < 0, len(names), codes)
        names.append(MISSING)
    return codes.astype(np.int64, copy=False), names


def _capped(codes: np.ndarray, names: list[str], top_k: int | None) -> tuple[np.ndarray, list[str]]:
    """Codes with all but the ``top_k`` most frequent values pooled as ``other`` (ties: by value)."""
    if top_k is None or len(names) <= top_k:
        return codes, names
    counts = np.bincount(codes, minlength=len(names))
    keep = sorted(range(len(names)), key=lambda i: (-counts[i], names[i]))[:top_k]
    remap = np.full(len(names), top_k, dtype=np.int64)
    remap[keep] = np.arange(top_k)
    return remap[codes], [names[i] for i in keep] + [OTHER]


@dataclass(frozen=True)
class _Window:
    """The per-row arrays every segment reuses, computed once per check."""

    classes: np.ndarray         # each row's class for grouped_labelled (score bucket, label, correct)
    n_classes: int
    has_accuracy: bool          # the task's rows are right or wrong (classifiers), so values have an accuracy
    abs_error: np.ndarray | None  # regression: each row's |prediction - target| (NaN: unlabelled)
    scored: np.ndarray | None   # row mask: a finite score (None: every row)
    q: np.ndarray | None        # P(served label is right) of the scored rows (CBPE), None without a calibrator
    q_var: np.ndarray | None    # q (1 - q)
    bins: np.ndarray | None     # their reference-score bin
    reference_counts: np.ndarray | None  # reference rows per score bin (the calibrator's)
    hours: np.ndarray | None


def _window(current: pd.DataFrame, model_cfg: ModelConfig, calibrator: Any) -> _Window:
    score = pd.to_numeric(current[model_cfg.score], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    y = (pd.to_numeric(current[model_cfg.target], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
         if model_cfg.target in current.columns else np.full(len(current), np.nan))
    scored = np.isfinite(score)
    labelled = ~np.isnan(y) & scored
    task = model_cfg.kind
    yl = y[labelled]
    pred = served_labels(current, model_cfg, score, np.ones(len(current), dtype=bool))
    right, errors = task.row_outcomes(yl, pred[labelled])  # accuracy (classifiers) or the MAE (regression)
    abs_error = None
    if errors is not None:
        abs_error = np.full(len(y), np.nan)
        abs_error[labelled] = errors
    correct = np.zeros(len(yl), dtype=bool) if right is None else right.astype(bool)
    q = bins = counts = None
    if isinstance(calibrator, Calibrator):   # binary CBPE: the estimate per segment is its accuracy
        counts = calibrator.counts
        p = calibrator(score[scored])
        q = np.where(pred[scored] == 1, p, 1.0 - p)
        bins = calibrator.bins(score[scored])
    # Recall and ROC AUC count label 1 as the positive class: a binary model's only.
    classes, n_classes = row_classes(labelled, task.positive_labels(yl), correct, score[labelled])
    return _Window(classes, n_classes, right is not None, abs_error, None if scored.all() else scored, q,
                   None if q is None else q * (1.0 - q), bins, counts, _time_parts(current))


def segment_performance(current: pd.DataFrame, model_cfg: ModelConfig, drift_cfg: DriftConfig,
                        reference: ReferenceSegments | None = None, calibrator: Any = None,
                        sample: tuple[np.ndarray | None, pd.DataFrame] | None = None,
                        cache: dict[str, Any] | None = None) -> list[SegmentPerformance]:
    """Per segment and value, in ``model.segments`` order, values by row count (``other`` last).
    ``calibrator``: the champion's (monitor.drift.estimation) for the estimated accuracy;
    ``sample``: the drift sample's positions in ``current`` (None: all rows) and its frame, for the drift share;
    ``cache``: the check's factorisations, shared with the unseen-category scan."""
    if not model_cfg.segments or not len(current):
        return []
    w = _window(current, model_cfg, calibrator)
    binned = None
    if sample is not None and reference is not None and reference.binned is not None:
        binned = reference.bin_sample(sample[1])
    out: list[SegmentPerformance] = []
    for segment in model_cfg.segments:
        if segment not in TIME_SEGMENTS and segment not in model_cfg.categorical_features:
            continue  # not (or no longer) a categorical feature of the champion
        found = segment_codes(current, segment, w.hours, cache)
        if found is None:
            continue
        codes, names = _capped(*found, None if segment in TIME_SEGMENTS else model_cfg.segment_top_k)
        out += _values(segment, codes, names, w, drift_cfg, reference, sample, binned)
    return out


def _values(segment: str, codes: np.ndarray, names: list[str], w: _Window, drift_cfg: DriftConfig,
            reference: ReferenceSegments | None, sample: Any, binned: np.ndarray | None) -> list[SegmentPerformance]:
    k = len(names)
    g = grouped_labelled(codes, k, w.classes, w.n_classes)
    rows, n_lab, correct, positives, hits, auc = (g[x] for x in ("rows", "labelled", "correct", "positives", "hits",
                                                                  "roc_auc"))
    est = half = None
    if w.q is not None and w.q_var is not None and w.bins is not None and w.reference_counts is not None:
        est, half = grouped_estimate(codes if w.scored is None else codes[w.scored], k, w.q, w.q_var, w.bins,
                                     w.reference_counts, drift_cfg.confidence)
    share = drift_rows = None
    if binned is not None and reference is not None:
        positions = sample[0]
        sc = codes if positions is None else codes[positions]
        share, drift_rows = grouped_drift_share(sc, k, binned, reference.offsets, reference.widths,
                                                reference.histograms(segment, names), drift_cfg.stattest_threshold)
    ref = reference.figures(segment, names) if reference is not None else {}
    mae = mae_half = None
    if w.abs_error is not None:
        mae, mae_half = grouped_errors(codes, k, w.abs_error, drift_cfg.confidence)
    present = [i for i in range(k) if rows[i]]  # hours and days with no rows are left out
    if segment in TIME_SEGMENTS:
        order = sorted(present, key=lambda i: DAYS.index(names[i]) if names[i] in DAYS else int(names[i]))
    else:
        order = sorted(present, key=lambda i: (names[i] == OTHER, -rows[i], names[i]))

    def num(a: np.ndarray | None, i: int) -> float | None:
        return None if a is None or not np.isfinite(a[i]) else float(a[i])
    out = []
    for i in order:
        n, npos = int(n_lab[i]), int(positives[i])
        e = num(est, i)
        enough = drift_rows is not None and drift_rows[i] >= drift_cfg.segment_min_labels
        m, h = num(mae, i), num(mae_half, i)
        out.append(SegmentPerformance(
            segment=segment, value=names[i], rows=int(rows[i]), labelled_rows=n,
            accuracy=correct[i] / n if n and w.has_accuracy else None,
            accuracy_ci=wilson_interval(int(correct[i]), n, drift_cfg.confidence) if w.has_accuracy else None,
            recall=hits[i] / npos if npos else None, roc_auc=num(auc, i),
            reference_accuracy=num(ref.get("accuracy"), i), judged=n >= drift_cfg.segment_min_labels,
            recall_ci=wilson_interval(int(round(hits[i])), npos, drift_cfg.confidence),
            reference_recall=num(ref.get("recall"), i), estimated_accuracy=e,
            estimated_accuracy_ci=None if e is None or half is None else
            (max(0.0, e - float(half[i])), min(1.0, e + float(half[i]))),
            drift_share=num(share, i) if enough else None,
            drift_rows=0 if drift_rows is None else int(drift_rows[i]),
            mae=m, mae_ci=None if m is None or h is None else (max(0.0, m - h), m + h),
            reference_mae=num(ref.get("mae"), i)))
    return out

