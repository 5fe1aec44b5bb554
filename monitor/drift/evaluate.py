"""One drift & performance check: the current window against the champion's reference.

Cost is bounded by ``drift.sample_size``, not by the window: Evidently runs on uniform samples
of at most that many rows per side, with each column's stattest decided on the full data
(:mod:`monitor.drift.methods`) so the verdicts are those of an unsampled run; the task's performance
with its intervals (the task's :meth:`~monitor.tasks.Task.performance`: accuracy and ROC AUC, macro F1 and
per-class figures, or MAE, RMSE, MAPE and R²) is computed in numpy on *all* labelled rows, and
its estimates without labels (:mod:`monitor.drift.estimation`) on *all* scored rows (both:
:mod:`monitor.drift.check_figures`). Beside the features, a multiclass model's outputs and the
labels of multiclass and regression models are tested for drift (:mod:`monitor.drift.columns`), and
the tabular features together (:mod:`monitor.drift.multivariate`, on the drift samples); with
``drift.descriptors``, numbers computed from the inputs (:mod:`monitor.drift.descriptors`).
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from monitor.config import DriftConfig, ModelConfig
from monitor.drift import runner
from monitor.drift.bounded import EVIDENTLY_STD_FLOOR, binnable, float32_bounded, float_columns
from monitor.drift.calibration import Calibrator
from monitor.drift.constraints import ConstraintsFile
from monitor.drift.check_figures import estimated_figures, float_or_none, measured_performance, task_figures
from monitor.drift.columns import evidently_columns, label_plan, output_plans, performance_frames
from monitor.drift.columns import plan as column_plan
from monitor.drift.descriptors import describe_window
from monitor.drift.drifted_rows import drifted_rows
from monitor.drift.embedding import EmbeddingDrift, embedding_drifts
from monitor.drift.frames import PreparedReference, missing_ratio, prepare_side, unseen_categories
from monitor.drift.levels import Folded, fold_levels
from monitor.drift.reference import prepare_reference
from monitor.drift.methods import CATEGORICAL, NUMERIC
from monitor.drift.multivariate import multivariate_drift
from monitor.drift.output_thresholds import calibrate as calibrate_outputs
from monitor.drift.recalibration import labelled_estimate
from monitor.drift.missing import missing_share_drift
from monitor.drift.result import CheckResult, FeatureDrift
from monitor.drift.segments import segment_performance
from monitor.drift.selection import label_selection
from monitor.drift.violations import check_constraints
from monitor.errors import DataError

log = logging.getLogger(__name__)


def _binnable_samples(reference: pd.DataFrame, current: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The drift report's samples with each float column numpy could not bin, or whose spread is
    under Evidently's floor, rescaled on its own (:func:`monitor.drift.bounded.binnable`)."""
    groups = [[c] for c in float_columns(current) if c in reference.columns]
    ref_sample, cur_sample = binnable(reference, current, groups, std_floor=EVIDENTLY_STD_FLOOR)
    assert ref_sample is not None  # given a reference, binnable returns one
    return ref_sample, cur_sample


def _feature_drift(name: str, plan: runner.ColumnPlan | str, verdicts: dict[str, runner.ColumnVerdict],
                   folded: Folded | None = None) -> FeatureDrift:
    """The drift of column ``plan.name`` under the name people see (``name``); ``folded``: how its
    many levels were folded before the test (``details``)."""
    if isinstance(plan, str):
        return FeatureDrift(name, None, None, None, False, skipped=plan)
    v = verdicts[plan.name]
    return FeatureDrift(name, v.method, v.score, v.threshold, v.drifted,
                        details=None if folded is None else {"folded": folded.to_dict()})


def _fold_label(frames: runner.PerformanceFrames, plan: runner.ColumnPlan | str | None, target: str,
                threshold: float | None) -> tuple[runner.PerformanceFrames, runner.ColumnPlan | str | None,
                                                  Folded | None]:
    """The performance frames with a folded copy of a categorical target, and the label plan moved
    onto it, when the classes are more than the samples can compare without noise
    (:mod:`monitor.drift.levels`); unchanged otherwise."""
    if not isinstance(plan, runner.ColumnPlan) or plan.kind != CATEGORICAL or frames.reference is None:
        return frames, plan, None
    ref, cur, folded = fold_levels(frames.reference[[target]], frames.current[[target]], [target], threshold)
    if target not in folded:
        return frames, plan, None
    column = f"{target} (folded)"  # its name in Evidently's report; a class's column is never renamed
    while column in frames.current.columns:
        column = f"_{column}"
    frames = dataclasses.replace(frames, reference=frames.reference.assign(**{column: ref[target]}),
                                 current=frames.current.assign(**{column: cur[target]}))
    return frames, dataclasses.replace(plan, name=column), folded[target]


def _embedding_feature(name: str, verdict: EmbeddingDrift | str) -> FeatureDrift:
    """An embedding feature's test as one feature of the check (it counts once in the drift share)."""
    if isinstance(verdict, str):
        return FeatureDrift(name, None, None, None, False, skipped=verdict)
    return FeatureDrift(name, verdict.method, verdict.score, verdict.threshold, verdict.drifted,
                        details=verdict.to_dict())


def evaluate_window(reference: pd.DataFrame | PreparedReference, current: pd.DataFrame, model_cfg: ModelConfig,
                    drift_cfg: DriftConfig, baseline_metrics: Mapping[str, Any] | None, *, rng_seed: int = 0,
                    clock: Callable[[], float] = time.time, artifacts: Path | None = None,
                    constraints: ConstraintsFile | None = None) -> CheckResult:
    """Compare ``current`` (a store window) with ``reference`` (the champion's baseline sample).

    ``reference`` may be a :class:`PreparedReference` (see :func:`prepare_reference`) to skip
    preparing it again; ``artifacts`` (the champion's entrypoint artifacts, for ``drift.descriptors``'
    vocabulary) is used only when preparing it here. Raises :class:`DataError` when the frames
    cannot be compared (missing columns, empty, non-numeric values in numeric columns, labels the
    task does not know, no feature with values on both sides). ``constraints``: the model's
    constraints file (:func:`monitor.drift.constraints.constraints_for`), checked on the whole window
    into ``CheckResult.constraints``; one that could not be read is reported there, never raised."""
    started = time.perf_counter()
    checked_at = float(clock())
    check_id = uuid.uuid4().hex[:12]
    rng = np.random.default_rng([rng_seed, 1])  # the reference draws from stream [seed, 0]
    current = float32_bounded(current)  # a stored 1e308 must not blind the check (monitor.drift.bounded)
    ref = reference if isinstance(reference, PreparedReference) else prepare_reference(
        reference, model_cfg, drift_cfg, rng_seed, artifacts)
    cur = prepare_side(current, model_cfg, drift_cfg, rng, "current window")
    if not cur.has_score:
        raise DataError(f"the current window lacks the score column {model_cfg.score!r}")
    # drift.descriptors: their columns join the window's sample, tested beside the score (none when off).
    cur, descriptors = describe_window(ref, current, cur, model_cfg, drift_cfg, rng_seed)

    kinds = {f.name: (NUMERIC if f.type == "numeric" else CATEGORICAL) for f in model_cfg.features
             if f.type != "embedding"}
    plans = {name: column_plan(name, kind, ref, cur, current[name], drift_cfg) for name, kind in kinds.items()}
    tested = [p for p in plans.values() if not isinstance(p, str)]
    embedded = embedding_drifts(ref.embeddings, current, model_cfg, drift_cfg, rng_seed)
    if not tested and all(isinstance(e, str) for e in embedded.values()):
        reasons = "; ".join(f"{n}: {p}" for n, p in {**plans, **embedded}.items())
        raise DataError(f"no feature can be tested for drift ({reasons})")
    score_plan = (column_plan(model_cfg.score, NUMERIC, ref, cur, current[model_cfg.score], drift_cfg)
                  if ref.side.has_score else "no score column in the reference")
    outputs = output_plans(ref, cur, model_cfg, drift_cfg)

    metadata = {"model": model_cfg.name, "check_id": check_id, "window_rows": str(cur.rows),
                "reference_rows": str(ref.rows), "current_sample_rows": str(len(cur.sample)),
                "reference_sample_rows": str(len(ref.side.sample))}
    ref_sample, cur_sample = _binnable_samples(ref.side.sample, cur.sample)
    # Many-level categories: the most frequent levels tested, the rest folded (monitor.drift.levels).
    ref_sample, cur_sample, folded = fold_levels(ref_sample, cur_sample,
                                                 [p.name for p in tested if p.kind == CATEGORICAL],
                                                 drift_cfg.stattest_threshold)
    snapshot, verdicts = runner.run_drift(
        ref_sample, cur_sample, tested, score_plan if not isinstance(score_plan, str) else None,
        drift_share=drift_cfg.drift_share, threshold=drift_cfg.stattest_threshold,
        timestamp=checked_at, metadata=metadata,
        outputs=[p for _, p in outputs if not isinstance(p, str)] + descriptors.tested)
    # The outputs' thresholds from the reference's own variability (a confident classifier's noise).
    verdicts = calibrate_outputs(verdicts, [score_plan, *(p for _, p in outputs)], ref_sample, cur_sample,
                                 ref.output_thresholds, drift_cfg.output_drift_quantile, rng_seed)

    labelled = cur.labelled
    perf = measured_performance(labelled, model_cfg, drift_cfg.confidence)
    target, prediction = evidently_columns(model_cfg)
    labels = label_plan(ref, labelled, model_cfg, drift_cfg, target)
    label_verdicts: dict[str, runner.ColumnVerdict] = {}
    label_folded: Folded | None = None
    if perf.rows and labelled is not None:
        frames = performance_frames(ref, labelled, model_cfg, drift_cfg.sample_size, rng)
        # The target and the prediction share their units: rescaled together, if at all.
        frames_ref, frames_cur = binnable(frames.reference, frames.current, [float_columns(frames.current)])
        frames = dataclasses.replace(frames, reference=frames_ref, current=frames_cur)
        # A label of many classes is tested with its rare classes folded, as a feature of many levels
        # is; on a column of its own, for the performance figures read the classes as they are.
        frames, labels, label_folded = _fold_label(frames, labels, target, drift_cfg.stattest_threshold)
        try:
            perf_snapshot, label_verdicts = runner.run_performance(
                frames, target=target, prediction=prediction, score=model_cfg.score, timestamp=checked_at,
                metadata=metadata, label_drift=labels if isinstance(labels, runner.ColumnPlan) else None,
                threshold=drift_cfg.stattest_threshold)
        except DataError as exc:
            # The judged figures are numpy's (perf, above); Evidently's report of them is a view, and its
            # regression metrics fail on windows they cannot describe (every target 0: the baseline of
            # its MAPE divides by them). The check goes on without that report and the label's test.
            log.warning("check %s: no performance report: %s", check_id, exc)
            if labels is not None:
                labels = f"not tested: {exc}"
        else:
            metadata = {**metadata, "labelled_rows": str(perf.rows),
                        "performance_sample_rows": str(len(frames.current))}
            snapshot = runner.merge(*((snapshot, perf_snapshot) if snapshot is not None else (perf_snapshot,)),
                                    metadata=metadata)

    estimated = estimated_figures(ref, current, labelled, model_cfg, drift_cfg, perf.accuracy)
    if drift_cfg.estimate and perf.rows:  # does the estimate hold on the rows labels can judge?
        judged = labelled_estimate(ref.calibrator, current, model_cfg, drift_cfg.confidence)
        if judged is not None:
            estimated["estimation_check"] = judged.to_dict()
            estimated.setdefault("estimation_error", judged.error)  # regression: realised - estimated MAE
    if drift_cfg.label_selection and perf.rows:  # labels chosen by the score move the realised figures' bars
        chosen = label_selection(current, model_cfg, ref.calibrator if drift_cfg.estimate else None,
                                 drift_cfg.confidence)
        if chosen is not None:
            estimated["label_selection"] = chosen.to_dict()
    codes: dict[str, Any] = {}  # one factorisation per categorical column, for segments and unseen categories
    segments = segment_performance(current, model_cfg, drift_cfg, ref.segments,
                                   (ref.calibrator if drift_cfg.estimate and isinstance(ref.calibrator, Calibrator)
                                    else None),
                                   (cur.positions, cur.sample), codes)
    features = [_embedding_feature(f.name, embedded[f.name]) if f.type == "embedding"
                else _feature_drift(f.name, plans[f.name], verdicts, folded.get(f.name)) for f in model_cfg.features]
    # A feature that went missing is drifted whatever its values do (monitor/drift/missing.py).
    missing = missing_ratio(current, model_cfg.feature_names)
    features = [missing_share_drift(f, ref.missing.get(f.name), ref.rows, missing.get(f.name), cur.rows,
                                    drift_cfg.missing_share_change) for f in features]
    evaluated = [f for f in features if f.skipped is None]
    if len(evaluated) < len(features):
        log.warning("drift not tested for %s", ", ".join(f"{f.name} ({f.skipped})" for f in features if f.skipped))
    described = descriptors.drifts(verdicts)  # listed with the features; in the share if drift.descriptors says
    if descriptors.counted:
        evaluated += [f for f in described if f.skipped is None]
    share = sum(f.drifted for f in evaluated) / len(evaluated)
    multivariate = multivariate_drift(ref.multivariate, cur.sample, drift_cfg)
    # Multivariate drift stands beside the drift share unless drift.multivariate_dataset_drift counts it in.
    dataset_drift = share >= drift_cfg.drift_share or bool(
        drift_cfg.multivariate_dataset_drift and multivariate is not None and multivariate.drifted)
    baseline = dict(baseline_metrics or {})
    result = CheckResult(
        check_id=check_id, model=model_cfg.name, checked_at=checked_at,
        window_rows=cur.rows, labelled_rows=perf.rows,
        features=features + described, drift_share=share, drift_share_threshold=drift_cfg.drift_share,
        dataset_drift=dataset_drift,
        prediction_drift=_feature_drift(model_cfg.score, score_plan, verdicts),
        accuracy=perf.accuracy, accuracy_ci=perf.accuracy_ci, roc_auc=perf.roc_auc, roc_auc_ci=perf.roc_auc_ci,
        baseline_accuracy=float_or_none(baseline.get("accuracy")),
        baseline_roc_auc=float_or_none(baseline.get("roc_auc")),
        # A check job resolves drift.min_labels: auto per champion (monitor/drift/min_labels.py) before
        # it calls; called alone, auto counts as the most it can resolve to.
        confidence=drift_cfg.confidence, min_labels=drift_cfg.min_labels_at_most,
        performance_actionable=perf.rows >= drift_cfg.min_labels_at_most, positive_rate=perf.positive_rate,
        reference_rows=ref.rows, reference_sample_rows=len(ref.side.sample), current_sample_rows=len(cur.sample),
        missing_ratio=missing, reference_missing_ratio=dict(ref.missing),
        unseen_categories=unseen_categories(ref, current, model_cfg.categorical_features, cache=codes),
        precision=perf.precision, recall=perf.recall, f1=perf.f1, **estimated,
        **task_figures(perf, model_cfg, baseline, ref.metrics),
        output_drift=[_feature_drift(name, p, verdicts) for name, p in outputs],
        label_drift=None if labels is None else _feature_drift(model_cfg.target, labels, label_verdicts,
                                                               label_folded),
        segments=segments, baselines=dict(ref.metrics), multivariate=multivariate,
        drifted_rows=drifted_rows(ref.embeddings, embedded, current, model_cfg, rng_seed),
        descriptors=descriptors.report,
        # The model's constraints file (drift.constraints; monitor.drift.violations), on the whole window.
        constraints=None if constraints is None else check_constraints(constraints, current, model_cfg),
        duration_seconds=time.perf_counter() - started, snapshot=snapshot,
    )
    log.debug("check %s: %d rows (%d sampled), %d labelled, drift share %.2f, %.2f s", check_id, result.window_rows,
              result.current_sample_rows, result.labelled_rows, share, result.duration_seconds)
    return result


class DriftEvaluator:
    """``evaluate_window`` with the prepared reference cached per champion.

    The reference only changes with the champion, so its sample and description are kept. The
    key is ``reference_key`` (e.g. the champion version) when given, else the reference
    DataFrame's identity (held by weak reference, so a new champion's frame is a new entry).
    Usable as the daemon's ``evaluate`` callable."""

    def __init__(self, *, rng_seed: int = 0, clock: Callable[[], float] = time.time, max_entries: int = 2):
        self._rng_seed = rng_seed
        self._clock = clock
        self._max = max_entries
        self._cache: OrderedDict[Any, tuple[Any, PreparedReference]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def prepared(self, reference: pd.DataFrame, model_cfg: ModelConfig, drift_cfg: DriftConfig,
                 reference_key: Any = None, artifacts: Path | None = None) -> PreparedReference:
        settings = (drift_cfg.sample_size, drift_cfg.estimate, drift_cfg.embedding_sample_rows,
                    drift_cfg.embedding_components, drift_cfg.multivariate, model_cfg.model_dump_json(),
                    drift_cfg.descriptors.model_dump_json(), self._rng_seed)
        key = (reference_key if reference_key is not None else ("id", id(reference)), settings)
        with self._lock:
            entry = self._cache.get(key)
            if entry is not None and (reference_key is not None or entry[0]() is reference):
                self._cache.move_to_end(key)
                self.hits += 1
                return entry[1]
        prepared = prepare_reference(reference, model_cfg, drift_cfg, self._rng_seed, artifacts)
        with self._lock:
            self.misses += 1
            self._cache[key] = (weakref.ref(reference), prepared)
            while len(self._cache) > self._max:
                self._cache.popitem(last=False)
        return prepared

    def __call__(self, reference: pd.DataFrame, current: pd.DataFrame, model_cfg: ModelConfig,
                 drift_cfg: DriftConfig, baseline_metrics: Mapping[str, Any] | None, *,
                 reference_key: Any = None, estimator: Any = None, artifacts: Path | None = None,
                 constraints: ConstraintsFile | None = None) -> CheckResult:
        """``estimator``: a label-free estimator to use in place of the reference's (the daemon's
        recalibrated one, :mod:`monitor.daemon.runtime.estimation_watch`); ``artifacts``: the
        champion's entrypoint artifacts (``drift.descriptors``' vocabulary), read when preparing."""
        prepared = self.prepared(reference, model_cfg, drift_cfg, reference_key, artifacts)
        if estimator is not None:
            prepared = dataclasses.replace(prepared, calibrator=estimator)
        return evaluate_window(prepared, current, model_cfg, drift_cfg, baseline_metrics,
                               rng_seed=self._rng_seed, clock=self._clock, constraints=constraints)
