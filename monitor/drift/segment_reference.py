"""What the segments need from the champion's reference, prepared once per champion.

Per categorical segment, each reference row's value; each row's correctness and label (for the
values' reference accuracy and recall; a multiclass model's rows have no positive class, so no
recall), or its absolute error (a regression model's reference MAE per value); and every feature binned (numeric:
reference deciles, categorical: its most frequent categories plus one bin for the rest) for the per-value drift share.
The reference has no prediction times, so a time bucket's values are compared with the whole
reference, and so is a categorical value with fewer than ``MIN_REFERENCE_ROWS`` reference rows.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from monitor.config import TIME_SEGMENTS, ModelConfig
from monitor.drift.frames import served_labels
from monitor.drift.grouped import DRIFT_BINS, bin_edges

OTHER, MISSING = "other", "missing"
MIN_REFERENCE_ROWS = 100  # fewer reference rows of a value: no reference figures for it


def value_strings(frame: pd.DataFrame, segment: str) -> np.ndarray | None:
    """Each row's value of a categorical segment as a string (``missing`` for none)."""
    if segment not in frame.columns:
        return None
    col = frame[segment]
    return col.astype(object).where(col.notna(), MISSING).astype(str).to_numpy(dtype=object)


def _index_of(keys: np.ndarray, names: list[str]) -> np.ndarray:
    """Each key's position in ``names`` (``other``: every key not named)."""
    kept = [n for n in names if n != OTHER]
    codes = pd.Categorical(keys, categories=kept).codes.astype(np.int64)
    return np.where(codes < 0, names.index(OTHER) if OTHER in names else -1, codes)


@dataclass(frozen=True)
class Binning:
    """How one feature is binned for the drift share: numeric edges, or the kept categories."""

    edges: np.ndarray | None
    categories: list | None

    @property
    def bins(self) -> int:
        return len(self.edges) + 1 if self.edges is not None else len(self.categories or []) + 1

    def apply(self, values: pd.Series) -> np.ndarray:
        """Each value's bin, -1 for none."""
        present = values.notna().to_numpy()
        if self.edges is not None:
            v = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
            out = np.searchsorted(self.edges, v, side="right").astype(np.int64)
            return np.where(np.isfinite(v), out, -1)
        codes = pd.Categorical(values.astype(object).where(values.notna(), None),
                               categories=self.categories).codes.astype(np.int64)
        return np.where(present, np.where(codes < 0, len(self.categories or []), codes), -1)


def binning_of(values: pd.Series, numeric: bool) -> Binning:
    if numeric:
        return Binning(bin_edges(pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)),
                       None)
    top = values.dropna().astype(object).value_counts().index[: DRIFT_BINS - 1]
    return Binning(None, list(top))


@dataclass(frozen=True)
class ReferenceSegments:
    keys: dict[str, np.ndarray]                 # categorical segment -> each reference row's value
    correct: np.ndarray | None                  # each reference row: served label == label (labelled rows)
    label: np.ndarray | None                    # each reference row's label (NaN: none)
    binnings: dict[str, Binning] = field(default_factory=dict)
    binned: np.ndarray | None = None            # (rows, features): each reference row's bin, shifted (Binning order)
    _histograms: dict = field(default_factory=dict, compare=False, repr=False)  # (segment, values) -> counts
    abs_error: np.ndarray | None = None         # regression: each reference row's |error| (NaN: no label)

    @property
    def widths(self) -> np.ndarray:
        return _widths(self.binnings)

    @property
    def offsets(self) -> np.ndarray:
        return _offsets(self.binnings)

    def bin_sample(self, sample: pd.DataFrame) -> np.ndarray | None:
        """(rows, features): the drift sample's bins on the shared axis (-1: no value); None when the
        sample lacks a feature the reference was binned on."""
        if not self.binnings or any(f not in sample.columns for f in self.binnings):
            return None
        return _shifted([b.apply(sample[f]) for f, b in self.binnings.items()], self.offsets)

    def figures(self, segment: str, names: list[str]) -> dict[str, np.ndarray]:
        """Per value of ``names``: reference ``accuracy`` and ``recall`` (NaN under
        ``MIN_REFERENCE_ROWS`` rows or no positives); a regression model's ``mae`` instead."""
        keys = self.keys.get(segment)
        k = len(names)
        if self.abs_error is not None:
            if keys is None:
                return {"mae": np.full(k, np.nan)}
            idx = _index_of(keys, names)
            ok = np.isfinite(self.abs_error) & (idx >= 0)
            n = np.bincount(idx[ok], minlength=k).astype(np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                mae = np.bincount(idx[ok], weights=self.abs_error[ok], minlength=k) / n
            return {"mae": np.where(n >= MIN_REFERENCE_ROWS, mae, np.nan)}
        if keys is None or self.correct is None or self.label is None:
            return {"accuracy": np.full(k, np.nan), "recall": np.full(k, np.nan)}
        idx = _index_of(keys, names)
        lab = ~np.isnan(self.label)
        i, y = idx[lab], self.label[lab]
        ok = i >= 0
        i, y, c = i[ok], y[ok], self.correct[lab][ok]
        n = np.bincount(i, minlength=k).astype(np.float64)
        pos = np.bincount(i, weights=y, minlength=k)
        hits = np.bincount(i, weights=y * c, minlength=k)
        with np.errstate(invalid="ignore", divide="ignore"):
            acc = np.where(n >= MIN_REFERENCE_ROWS, np.bincount(i, weights=c, minlength=k) / n, np.nan)
            rec = np.where((n >= MIN_REFERENCE_ROWS) & (pos > 0), hits / pos, np.nan)
        return {"accuracy": acc, "recall": rec}

    def histograms(self, segment: str, names: list[str]) -> np.ndarray:
        """(values, cells): reference counts per shifted bin for each value: the value's own reference
        rows when it has ``MIN_REFERENCE_ROWS``, else the whole reference. Cached: a segment's
        values rarely change between checks."""
        key = (segment, tuple(names))
        found = self._histograms.get(key)
        if found is not None:
            return found
        assert self.binned is not None
        cells, k = int(self.widths.sum()), len(names)
        valid = self.binned >= 0
        whole = np.bincount(self.binned[valid], minlength=cells).astype(np.float64)
        hist = np.tile(whole, (k, 1))
        keys = self.keys.get(segment)
        if keys is not None:
            idx = _index_of(keys, names)
            ok = valid & (idx >= 0)[:, None]
            own = np.bincount((idx[:, None] * cells + self.binned)[ok], minlength=k * cells).reshape(k, cells)
            enough = np.bincount(idx[idx >= 0], minlength=k) >= MIN_REFERENCE_ROWS
            hist[enough] = own[enough]
        if len(self._histograms) > 64:
            self._histograms.clear()
        self._histograms[key] = hist
        return hist


def _widths(binnings: dict[str, Binning]) -> np.ndarray:
    return np.asarray([b.bins for b in binnings.values()], dtype=np.int64)


def _offsets(binnings: dict[str, Binning]) -> np.ndarray:
    """Where each feature's bins start on the shared axis."""
    return np.r_[0, np.cumsum(_widths(binnings))[:-1]].astype(np.int64)


def _shifted(columns: list[np.ndarray], offsets: np.ndarray) -> np.ndarray:
    binned = np.stack(columns, axis=1) if columns else np.zeros((0, 0), dtype=np.int64)
    return np.where(binned >= 0, binned + offsets[None, :], -1)


def reference_segments(reference: pd.DataFrame, model_cfg: ModelConfig) -> ReferenceSegments | None:
    """Prepared once per champion (monitor.drift.reference.prepare_reference); None without segments."""
    if not model_cfg.segments:
        return None
    correct = label = abs_error = None
    if model_cfg.target in reference.columns and model_cfg.score in reference.columns:
        y = pd.to_numeric(reference[model_cfg.target], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
        score = pd.to_numeric(reference[model_cfg.score], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
        label = np.where(np.isfinite(score), y, np.nan)
        pred = served_labels(reference, model_cfg, score, np.ones(len(reference), dtype=bool))
        # Accuracy (classifiers) or the MAE (regression) per value; recall is a binary model's (label 1 positive).
        correct, abs_error = model_cfg.kind.row_outcomes(label, pred)
        label = model_cfg.kind.positive_labels(label)
    keys = {}
    for s in model_cfg.segments:
        if s not in TIME_SEGMENTS:
            found = value_strings(reference, s)
            if found is not None:
                keys[s] = found
    binnings = {f.name: binning_of(reference[f.name], f.type == "numeric")
                for f in model_cfg.features if f.name in reference.columns and f.type != "embedding"}
    binned = _shifted([b.apply(reference[f]) for f, b in binnings.items()], _offsets(binnings)) if binnings else None
    return ReferenceSegments(keys, correct, label, binnings, binned, abs_error=abs_error)
