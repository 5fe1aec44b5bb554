"""Per-segment performance: the window cut by ``model.segments``, so a drop in one slice (one
region, the night hours) is not averaged away by the aggregate.

A segment is a categorical feature or a time bucket of the prediction's ``ts`` (``hour_of_day``
0-23 UTC, ``day_of_week`` mon-sun). A categorical segment keeps its ``model.segment_top_k``
values with the most rows in the window and pools the rest as ``other``, so no feature can
explode the metric series; time buckets are bounded already (24 and 7 values). Missing values
are the value ``missing``.

For each value: rows, labelled rows, accuracy with its Wilson interval, recall and ROC AUC of the
labelled rows (AUC on at most ``AUC_ROWS`` of them), and the value's accuracy on the champion's reference sample (categorical segments;
the reference has no prediction times, so time buckets have none). A value is *judged* when it
has ``drift.segment_min_labels`` labelled rows. Grouping is ``pd.factorize`` + ``np.bincount``:
one hash pass per segment, no per-value loops over the rows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from monitor.config import TIME_SEGMENTS, DriftConfig, ModelConfig
from monitor.drift.frames import served_labels
from monitor.drift.stats import wilson_interval

OTHER, MISSING = "other", "missing"
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
MIN_REFERENCE_ROWS = 100  # fewer reference rows of a value: no reference accuracy for it
# A segment value's ROC AUC is a point figure (no interval): on more labelled rows than this it
# is computed on an even stride of them (standard error ~0.003), since ranking every row of every
# value of twenty segments would cost more than the rest of the check.
AUC_ROWS = 20_000


def _auc(y: np.ndarray, s: np.ndarray) -> float | None:
    """Mann-Whitney ROC AUC (ties one half); None without both classes."""
    pos = int(y.sum())
    neg = len(y) - pos
    if pos == 0 or neg == 0:
        return None
    ranks = rankdata(s)
    return float((ranks[y == 1].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


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

    @property
    def label(self) -> str:
        """The ``segment`` label of its metric series: ``hour_of_day=2``."""
        return f"{self.segment}={self.value}"

    def to_dict(self) -> dict[str, Any]:
        def num(x: float | None) -> float | None:
            return None if x is None or not math.isfinite(x) else float(x)
        return {"segment": self.segment, "value": self.value, "rows": self.rows, "labelled_rows": self.labelled_rows,
                "accuracy": num(self.accuracy),
                "accuracy_ci": None if self.accuracy_ci is None else [num(self.accuracy_ci[0]), num(self.accuracy_ci[1])],
                "recall": num(self.recall), "roc_auc": num(self.roc_auc),
                "reference_accuracy": num(self.reference_accuracy), "judged": self.judged}


def segment_keys(frame: pd.DataFrame, segment: str) -> np.ndarray | None:
    """Each row's value of ``segment`` as a string; None when the frame cannot say (no ``ts``)."""
    if segment in TIME_SEGMENTS:
        if "ts" not in frame.columns:
            return None
        ts = pd.to_datetime(frame["ts"], utc=True)
        if segment == "hour_of_day":
            return ts.dt.hour.astype(str).to_numpy(dtype=object)
        return np.asarray(DAYS, dtype=object)[ts.dt.dayofweek.to_numpy()]
    if segment not in frame.columns:
        return None
    col = frame[segment]
    return col.astype(object).where(col.notna(), MISSING).astype(str).to_numpy(dtype=object)


def segment_codes(frame: pd.DataFrame, segment: str) -> tuple[np.ndarray, list[str]] | None:
    """Each row's value of ``segment`` as an integer code, and the values' names; None when the
    frame cannot say (no ``ts`` for a time bucket). Cheaper than :func:`segment_keys` on big windows."""
    if segment in TIME_SEGMENTS:
        if "ts" not in frame.columns:
            return None
        ts = pd.to_datetime(frame["ts"], utc=True)
        if segment == "hour_of_day":
            return ts.dt.hour.to_numpy(dtype=np.int64), [str(h) for h in range(24)]
        return ts.dt.dayofweek.to_numpy(dtype=np.int64), list(DAYS)
    if segment not in frame.columns:
        return None
    codes, uniques = pd.factorize(frame[segment], use_na_sentinel=True)
    names = [str(u) for u in uniques]
    if (codes < 0).any():
        codes = np.where(codes < 0, len(names), codes)
        names.append(MISSING)
    return codes, names


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
class ReferenceSegments:
    """The reference's value and correctness per row, per categorical segment (prepared once per champion)."""

    keys: dict[str, np.ndarray]
    correct: np.ndarray | None

    def accuracy(self, segment: str, values: list[str]) -> dict[str, float]:
        keys = self.keys.get(segment)
        if keys is None or self.correct is None:
            return {}
        kept = set(values) - {OTHER}
        out = {}
        for v in values:
            rows = ~np.isin(keys, list(kept)) if v == OTHER else keys == v
            if rows.sum() >= MIN_REFERENCE_ROWS:
                out[v] = float(self.correct[rows].mean())
        return out


def reference_segments(reference: pd.DataFrame, model_cfg: ModelConfig) -> ReferenceSegments | None:
    """What the segments need from the reference: its labelled rows' keys and correctness."""
    wanted = [s for s in model_cfg.segments if s not in TIME_SEGMENTS]
    if not wanted or model_cfg.target not in reference.columns or model_cfg.score not in reference.columns:
        return None
    y = pd.to_numeric(reference[model_cfg.target], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    score = pd.to_numeric(reference[model_cfg.score], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    keep = ~np.isnan(y) & np.isfinite(score)
    correct = served_labels(reference, model_cfg, score, keep) == y[keep].astype(np.int64)
    keys = {}
    for s in wanted:
        k = segment_keys(reference, s)
        if k is not None:
            keys[s] = k[keep]
    return ReferenceSegments(keys, correct)


def segment_performance(current: pd.DataFrame, model_cfg: ModelConfig, drift_cfg: DriftConfig,
                        reference: ReferenceSegments | None = None) -> list[SegmentPerformance]:
    """Per segment and value, in ``model.segments`` order, values by row count (``other`` last)."""
    if not model_cfg.segments or not len(current):
        return []
    score = pd.to_numeric(current[model_cfg.score], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    has_target = model_cfg.target in current.columns
    y = (pd.to_numeric(current[model_cfg.target], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
         if has_target else np.full(len(current), np.nan))
    labelled = ~np.isnan(y) & np.isfinite(score)
    pred = served_labels(current, model_cfg, score, np.ones(len(current), dtype=bool))
    yl, pl, sl = y[labelled].astype(np.int64), pred[labelled], score[labelled]
    out: list[SegmentPerformance] = []
    for segment in model_cfg.segments:
        if segment not in TIME_SEGMENTS and segment not in model_cfg.categorical_features:
            continue  # not (or no longer) a categorical feature of the champion
        found = segment_codes(current, segment)
        if found is None:
            continue
        codes, names = _capped(*found, None if segment in TIME_SEGMENTS else model_cfg.segment_top_k)

        def _natural(i: int) -> int:  # hours 0..23, days mon..sun
            return DAYS.index(names[i]) if names[i] in DAYS else int(names[i])
        k = len(names)
        rows = np.bincount(codes, minlength=k)
        lc = codes[labelled]
        n_lab = np.bincount(lc, minlength=k)
        correct = np.bincount(lc, weights=(yl == pl), minlength=k)
        positives = np.bincount(lc, weights=yl, minlength=k)
        hits = np.bincount(lc, weights=(yl == 1) & (pl == 1), minlength=k)
        ref_acc = reference.accuracy(segment, names) if reference is not None else {}
        present = [i for i in range(k) if rows[i]]  # hours and days with no rows are left out
        order = sorted(present, key=_natural if segment in TIME_SEGMENTS else
                       lambda i: (names[i] == OTHER, -rows[i], names[i]))
        # One stable sort groups the labelled rows by value for the per-value ROC AUC.
        by_value = np.argsort(lc.astype(np.int16), kind="stable")  # small ints: numpy radix-sorts them
        bounds = np.r_[0, np.cumsum(n_lab)]
        for i in order:
            n = int(n_lab[i])
            auc = None
            if n >= 2:
                idx = by_value[bounds[i]:bounds[i + 1]]
                idx = idx[:: -(-n // AUC_ROWS)]  # an even stride: at most AUC_ROWS rows per value
                auc = _auc(yl[idx], sl[idx])
            out.append(SegmentPerformance(
                segment=segment, value=names[i], rows=int(rows[i]), labelled_rows=n,
                accuracy=correct[i] / n if n else None,
                accuracy_ci=wilson_interval(int(correct[i]), n, drift_cfg.confidence),
                recall=hits[i] / positives[i] if positives[i] else None, roc_auc=auc,
                reference_accuracy=ref_acc.get(names[i]), judged=n >= drift_cfg.segment_min_labels))
    return out
