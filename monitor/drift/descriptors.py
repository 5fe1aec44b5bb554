"""Descriptors (``drift.descriptors``): numbers driftloop computes from the inputs it can see, tested
for drift as features of their own.

A model opts in per kind and names the source (:class:`monitor.config.descriptors.DescriptorsConfig`):
text from the file each prediction's ``input_uri`` names or from a categorical feature; images from
the ``input_uri`` file. The values are :mod:`monitor.drift.descriptor_values`'. Each descriptor is a
numeric column of both drift samples named ``descriptor:<name>`` (``descriptor:text_oov_ratio``): a
feature's name is letters, digits and ``_`` (:class:`monitor.config.FeatureSpec`), so no feature can
take it. It gets the method a numeric feature would get (chosen on the values read,
:func:`monitor.drift.columns.plan`), runs in the drift report beside the score (Evidently's
``ValueDrift``, not in its preset's share), and is a :class:`~monitor.drift.result.FeatureDrift` of
``CheckResult.features``, so the report, the summary page, ``driftloop check``, ``/v1/status`` and
``driftloop_model_feature_drift_*{feature="descriptor:..."}`` show it. It counts in the drift share
only with ``drift.descriptors.drift_share``.

**Cost.** Only rows of the drift samples are read, at most ``drift.descriptors.sample_rows`` per side
(a seeded uniform sample of the sample; the other rows have no value). The reference's are read once
per champion and kept with the prepared reference (:class:`ReferenceDescriptors`, cached by
:class:`monitor.drift.DriftEvaluator`), with the vocabulary and the window's cache of values by uri;
a check reads the files of rows that cache has not seen.

**The vocabulary** of the out-of-vocabulary share is the champion's when its ``training.entrypoint``
saved one among its artifacts (``drift.descriptors.vocabulary``); otherwise the reference texts'
own, each reference text measured against the *other* texts' words
(:func:`~monitor.drift.descriptor_values.leave_one_out`).
"""
from __future__ import annotations

import dataclasses
import importlib.util
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from monitor.config import DriftConfig, ModelConfig
from monitor.config.descriptors import INPUT_URI_SOURCE, DescriptorsConfig
from monitor.drift import descriptor_values as dv
from monitor.drift.columns import plan as column_plan
from monitor.drift.frames import PreparedReference, Side, sample_positions
from monitor.drift.methods import NUMERIC, distinct_values
from monitor.drift.result import FeatureDrift
from monitor.drift.runner import ColumnPlan, ColumnVerdict
from monitor.embeddings import INPUT_URI
from monitor.records.inputs import InputRoots

log = logging.getLogger(__name__)

PREFIX = "descriptor:"   # a feature name cannot hold ':' (monitor.config.model.FeatureSpec)
TEXT, IMAGE = "text", "image"


def column(name: str) -> str:
    """The drift samples' (and the check's) name of descriptor ``name``: ``descriptor:<name>``."""
    return PREFIX + name


@dataclass
class SideCount:
    """One side's rows of one kind: sampled for descriptors, read, served from the cache, unread by reason."""

    rows: int = 0
    read: int = 0
    cached: int = 0
    unread: Counter[dv.Unread] = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "read": self.read, "cached": self.cached,
                "unread": {k.value: n for k, n in sorted(self.unread.items(), key=lambda kv: kv[0].value)}}


@dataclass
class KindReport:
    """What one kind of descriptor measured on both sides."""

    kind: str
    source: str
    names: list[str]
    reference: SideCount
    current: SideCount = field(default_factory=SideCount)
    vocabulary: dv.Vocabulary | None = None
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "source": self.source,
                               "descriptors": [column(n) for n in self.names], "skipped": self.skipped,
                               "reference": self.reference.to_dict(), "current": self.current.to_dict()}
        if self.vocabulary is not None:
            out["vocabulary"] = {"source": self.vocabulary.source, "words": len(self.vocabulary),
                                 "note": self.vocabulary.note}
        return out


@dataclass(frozen=True)
class DescriptorReport:
    """``CheckResult.descriptors``: per kind its source, the rows read and unread on each side, the
    vocabulary; the seconds the window's side took and whether descriptors count in the share."""

    kinds: tuple[KindReport, ...]
    seconds: float
    drift_share: bool

    def to_dict(self) -> dict[str, Any]:
        return {"kinds": [k.to_dict() for k in self.kinds], "seconds": round(self.seconds, 4),
                "drift_share": self.drift_share}


@dataclass
class ReferenceDescriptors:
    """The reference side of the descriptors, prepared once per champion: what each kind measures,
    the vocabulary, whether the reference's images have colour, and the window's cache of values."""

    config: DescriptorsConfig
    roots: InputRoots
    kinds: list[KindReport]
    cache: dv.ValueCache


# ---- measuring one side ----------------------------------------------------------------------------
def _sources(frame: pd.DataFrame, sample: pd.DataFrame, positions: np.ndarray | None, source: str) -> list[Any]:
    """The source's value of each row of the drift sample (``positions``: the sample's rows in ``frame``)."""
    if source != INPUT_URI_SOURCE:
        return sample[source].tolist()
    if INPUT_URI not in frame.columns:
        return [None] * len(sample)
    values = frame[INPUT_URI]
    return (values if positions is None else values.iloc[positions]).tolist()


def _measure(kind: KindReport, values: Sequence[Any], refs: ReferenceDescriptors, count: SideCount,
             vocabulary: dv.Vocabulary | None, cache: dv.ValueCache | None) -> list[tuple[float, ...] | None]:
    """Each row's values of ``kind`` (None: unread, counted in ``count``)."""
    out: list[tuple[float, ...] | None] = []
    limit = refs.config.max_file_bytes
    for value in values:
        count.rows += 1
        if kind.source == INPUT_URI_SOURCE and cache is not None and isinstance(value, str):
            hit = cache.get((kind.kind, value))
            if hit is not None:
                count.cached += 1
                out.append(hit)
                continue
        got: tuple[float, ...] | dv.Unread
        if kind.source != INPUT_URI_SOURCE:
            got = (dv.text_values(value, vocabulary) if isinstance(value, str) and value
                   else dv.Unread.NO_INPUT)
        else:
            data = dv.read_input(value, refs.roots, limit)
            if isinstance(data, dv.Unread):
                got = data
            elif kind.kind == TEXT:
                got = dv.text_values(dv.decode_text(data), vocabulary)
            else:  # the values, then 1.0 for a colour image (the reference decides on CHANNELS by it)
                image = dv.image_values(data)
                got = image if isinstance(image, dv.Unread) else (*image[0], float(image[1]))
        if isinstance(got, dv.Unread):
            count.unread[got] += 1
            out.append(None)
            continue
        count.read += 1
        if cache is not None and kind.source == INPUT_URI_SOURCE:
            cache.put((kind.kind, value), got)
        out.append(got)
    return out


def _block(rows: int, chosen: np.ndarray, values: list[tuple[float, ...] | None], names: list[str]) -> pd.DataFrame:
    """The descriptor columns of a drift sample of ``rows`` rows, NaN outside ``chosen`` and where unread."""
    block = np.full((rows, len(names)), np.nan)
    for row, got in zip(chosen, values):
        if got is not None:
            block[row] = got[:len(names)]
    return pd.DataFrame({column(n): block[:, i] for i, n in enumerate(names)})


def _chosen(rows: int, cap: int, seed: int, side: int) -> np.ndarray:
    positions = sample_positions(rows, cap, np.random.default_rng([seed, 7, side]))
    return np.arange(rows) if positions is None else positions


def _text_vocabulary(cfg: DescriptorsConfig, texts: list[str | None],
                     artifacts: Path | None) -> tuple[dv.Vocabulary, list[float] | None]:
    """The champion's vocabulary (no per-text shares), else the reference's own with each text's
    leave-one-out share."""
    found = dv.artifact_vocabulary(artifacts, cfg.vocabulary)
    if isinstance(found, dv.Vocabulary):
        return found, None
    vocabulary, shares = dv.leave_one_out(texts)
    return dataclasses.replace(vocabulary, note=found), shares


def _reference_kind(kind: str, source: str, frame: pd.DataFrame, side: Side, chosen: np.ndarray,
                    refs: ReferenceDescriptors, model_cfg: ModelConfig,
                    artifacts: Path | None) -> tuple[KindReport, pd.DataFrame | None]:
    names = list(dv.TEXT if kind == TEXT else dv.IMAGE)
    report = KindReport(kind, source, names, SideCount())
    if source != INPUT_URI_SOURCE and source not in model_cfg.categorical_features:
        report.skipped = f"{source!r} is neither {INPUT_URI_SOURCE} nor a categorical feature"
        return report, None
    if source == INPUT_URI_SOURCE and INPUT_URI not in frame.columns:
        report.skipped = f"the reference has no {INPUT_URI} column"
        return report, None
    if kind == IMAGE and importlib.util.find_spec("PIL") is None:  # MLflow's dependency, so rarely
        report.skipped = "Pillow is not installed (pip install pillow)"
        return report, None
    every = _sources(frame, side.sample, side.positions, source)
    sources = [every[i] for i in chosen]
    if kind == TEXT:  # read first, measured once the vocabulary is known
        read = [_text_of(s, source, refs) for s in sources]
        count = report.reference
        for got in read:
            count.rows += 1
            if isinstance(got, dv.Unread):
                count.unread[got] += 1
            else:
                count.read += 1
        texts = [None if isinstance(t, dv.Unread) else t for t in read]
        report.vocabulary, shares = _text_vocabulary(refs.config, texts, artifacts)
        values = [None if t is None else dv.text_values(t, report.vocabulary) for t in texts]
        if shares is not None:  # the reference's own words: each text against the others'
            values = [None if v is None else (v[0], v[1], s, v[3]) for v, s in zip(values, shares)]
        return report, _block(len(side.sample), chosen, values, names)
    values = _measure(report, sources, refs, report.reference, None, refs.cache)  # a window may replay them
    # Channel means only when some reference image has colour: a grey image's are its brightness.
    if any(v is not None and v[-1] == 1.0 for v in values):
        report.names = names = names + list(dv.CHANNELS)
    return report, _block(len(side.sample), chosen, values, names)


def _text_of(value: Any, source: str, refs: ReferenceDescriptors) -> str | dv.Unread:
    if source != INPUT_URI_SOURCE:
        return value if isinstance(value, str) and value else dv.Unread.NO_INPUT
    data = dv.read_input(value, refs.roots, refs.config.max_file_bytes)
    return data if isinstance(data, dv.Unread) else dv.decode_text(data)


def _extended(side: Side, block: pd.DataFrame) -> Side:
    sample = pd.concat([side.sample, block], axis=1)
    counts = {**side.counts, **{c: int(np.isfinite(block[c].to_numpy()).sum()) for c in block.columns}}
    return dataclasses.replace(side, sample=sample, counts=counts)


# ---- the reference, once per champion ------------------------------------------------------------------
def describe_reference(prepared: PreparedReference, reference: pd.DataFrame, model_cfg: ModelConfig,
                       drift_cfg: DriftConfig, rng_seed: int = 0,
                       artifacts: Path | None = None) -> PreparedReference:
    """``prepared`` with the descriptor columns in its drift sample and their reference state;
    ``prepared`` itself when ``drift.descriptors`` asks for none."""
    cfg = drift_cfg.descriptors
    if not cfg.enabled:
        return prepared
    refs = ReferenceDescriptors(cfg, InputRoots.of(model_cfg), [], dv.ValueCache(cfg.cache_entries))
    side = prepared.side
    chosen = _chosen(len(side.sample), cfg.sample_rows, rng_seed, 0)
    blocks = []
    for kind, source in ((TEXT, cfg.text), (IMAGE, cfg.image)):
        if source is None:
            continue
        report, block = _reference_kind(kind, source, reference, side, chosen, refs, model_cfg, artifacts)
        refs.kinds.append(report)
        if block is not None:
            blocks.append(block)
        _log_unread("reference", report, report.reference)
    if not blocks:
        return dataclasses.replace(prepared, descriptors=refs)
    block = pd.concat(blocks, axis=1)
    full_counts = {**prepared.full_counts, **{c: int(np.isfinite(block[c].to_numpy()).sum()) for c in block}}
    distinct = {**prepared.distinct, **{c: distinct_values(block[c]) for c in block}}
    return dataclasses.replace(prepared, side=_extended(side, block), full_counts=full_counts, distinct=distinct,
                               descriptors=refs)


def _log_unread(side: str, report: KindReport, count: SideCount) -> None:
    if count.unread:
        log.warning("%s descriptors: %d of %d %s rows give no value (%s)", report.kind, sum(count.unread.values()),
                    count.rows, side, ", ".join(f"{k.value} {n}" for k, n in count.unread.items()))


# ---- the window, every check ---------------------------------------------------------------------------
@dataclass(frozen=True)
class WindowDescriptors:
    """A check's descriptors: each one's plan (or why it is not tested) and the report; empty when off."""

    plans: tuple[tuple[str, ColumnPlan | str], ...] = ()
    report: DescriptorReport | None = None
    details: Mapping[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def tested(self) -> list[ColumnPlan]:
        return [p for _, p in self.plans if not isinstance(p, str)]

    @property
    def counted(self) -> bool:
        """Whether they count in the drift share (``drift.descriptors.drift_share``)."""
        return self.report is not None and self.report.drift_share

    def drifts(self, verdicts: Mapping[str, ColumnVerdict]) -> list[FeatureDrift]:
        """One :class:`FeatureDrift` per descriptor, from the drift report's verdicts."""
        out = []
        for name, p in self.plans:
            details = dict(self.details.get(name, {}))
            if isinstance(p, str) or p.name not in verdicts:
                out.append(FeatureDrift(name, None, None, None, False,
                                        skipped=p if isinstance(p, str) else "no verdict", details=details))
                continue
            v = verdicts[p.name]
            out.append(FeatureDrift(name, v.method, v.score, v.threshold, v.drifted, details=details))
        return out


def describe_window(ref: PreparedReference, current: pd.DataFrame, cur: Side, model_cfg: ModelConfig,
                    drift_cfg: DriftConfig, rng_seed: int = 0,
                    clock: Callable[[], float] = time.perf_counter) -> tuple[Side, WindowDescriptors]:
    """``cur`` with the descriptor columns in its drift sample, and the check's descriptors."""
    refs = ref.descriptors
    if not isinstance(refs, ReferenceDescriptors):
        return cur, WindowDescriptors()
    started = clock()
    chosen = _chosen(len(cur.sample), refs.config.sample_rows, rng_seed, 1)
    kinds: list[KindReport] = []
    blocks: list[pd.DataFrame] = []
    for kind in refs.kinds:
        report = dataclasses.replace(kind, current=SideCount())
        kinds.append(report)
        if kind.skipped is not None:
            continue
        sources = _sources(current, cur.sample, cur.positions, kind.source)
        values = _measure(report, [sources[i] for i in chosen], refs, report.current, kind.vocabulary, refs.cache)
        blocks.append(_block(len(cur.sample), chosen, values, kind.names))
        _log_unread("window", report, report.current)
    if blocks:
        cur = _extended(cur, pd.concat(blocks, axis=1))
    plans: list[tuple[str, ColumnPlan | str]] = []
    details: dict[str, dict[str, Any]] = {}
    for kind in kinds:
        for n in kind.names:
            name = column(n)
            if kind.skipped is not None:
                plans.append((name, kind.skipped))
                continue
            values = cur.sample[name]
            plans.append((name, column_plan(name, NUMERIC, ref, cur, values, drift_cfg)))
            details[name] = {"kind": kind.kind, "source": kind.source,
                             "reference_rows": ref.side.counts.get(name, 0), "current_rows": cur.counts.get(name, 0),
                             "reference_mean": _mean(ref.side.sample.get(name)), "current_mean": _mean(values)}
    seconds = clock() - started
    return cur, WindowDescriptors(tuple(plans), DescriptorReport(tuple(kinds), seconds, refs.config.drift_share),
                                  details)


def _mean(values: pd.Series | None) -> float | None:
    if values is None:
        return None
    arr = values.to_numpy(dtype=np.float64)
    arr = arr[np.isfinite(arr)]
    return float(arr.mean()) if len(arr) else None
