"""The only module that talks to Evidently: builds the reports, runs them, reads them back.

Two reports run, because they need different rows: the *drift* report on the samples of both
sides (features with a pinned method each, the score column for prediction drift and, for a
multiclass model, the served class and each class's probability for output drift) and the
*performance* report on labelled rows, with the reference's labelled rows alongside, per task:

============  ===========================================================================
binary        ``Accuracy`` of the served labels, ``RocAuc`` of the scores
multiclass    ``Accuracy``, ``F1Score`` (macro), ``PrecisionByLabel``, ``RecallByLabel`` of the
              served classes; ``RocAuc`` (one-vs-rest) of the probabilities; label drift
regression    ``MAE``, ``RMSE``, ``MAPE`` (no target 0), ``R2Score``; label drift
============  ===========================================================================

Label drift (the target's distribution, prior shift) rides in the performance report because only
labelled rows have a target. Their results are merged into one
:class:`evidently.core.report.Snapshot` so one HTML/JSON file shows the whole check.
Evidently's exceptions are translated here into :class:`monitor.errors.DataError`.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

import pandas as pd
from evidently import BinaryClassification, DataDefinition, Dataset, MulticlassClassification, Regression, Report
from evidently.core.report import Snapshot
from evidently.core.serialization import ReportModel, SnapshotModel
from evidently.legacy.calculations import stattests
from evidently.legacy.calculations.stattests.registry import register_stattest
from evidently.legacy.core import ColumnType
from evidently.metrics import (MAE, MAPE, RMSE, Accuracy, F1Score, PrecisionByLabel, R2Score, RecallByLabel, RocAuc,
                               ValueDrift)
from evidently.presets import DataDriftPreset

from monitor.errors import DataError
from monitor.tasks import task_of
from monitor.taskstats import mape_defined

_VALUE_DRIFT = "evidently:metric_v2:ValueDrift"
_LABELS_TASK, _PROBAS_TASK = "labels", "probas"
# Evidently reports an auto-selected method by display name ("Wasserstein distance (normed)").


def _chisquare_two_sample(reference_data: pd.Series, current_data: pd.Series, feature_type: object,
                          threshold: float) -> tuple[float, bool]:
    """Chi-square test of homogeneity on the 2 x k table of counts: both sides are samples.
    Evidently's ``chisquare`` tests the current counts against the reference's frequencies as if
    they were exact, so with a reference of 1,000 rows and a window of 5,000 its statistic is about
    (1 + 5000/1000) = 6 times too large: identical distributions "drifted" on most checks after a
    retrain on few rows (bench_outside ``categorical``)."""
    from scipy.stats import chi2_contingency
    table = pd.concat([reference_data.value_counts(), current_data.value_counts()], axis=1).fillna(0)
    counts = table.to_numpy(dtype=float).T
    counts = counts[:, counts.sum(axis=0) > 0]
    if counts.shape[1] < 2 or (counts.sum(axis=1) == 0).any():
        return 1.0, False
    p_value = float(chi2_contingency(counts, correction=False)[1])
    return p_value, p_value < threshold


CHISQUARE_TWO_SAMPLE = stattests.StatTest(
    name="chisquare_two_sample", display_name="Chi-square two-sample", default_threshold=0.05,
    allowed_feature_types=[ColumnType.Categorical, ColumnType.Numerical])
register_stattest(CHISQUARE_TWO_SAMPLE, _chisquare_two_sample)
_NAME_BY_DISPLAY = {t.display_name: t.name for t in [*vars(stattests).values(), CHISQUARE_TWO_SAMPLE]
                    if isinstance(t, stattests.StatTest)}


@dataclass(frozen=True)
class ColumnPlan:
    name: str
    kind: str                    # "numeric" | "categorical"
    method: str | None           # pinned stattest name; None leaves the choice to Evidently


@dataclass(frozen=True)
class ColumnVerdict:
    method: str
    score: float
    threshold: float
    drifted: bool


@dataclass(frozen=True)
class PerformanceFrames:
    """(Samples of) the labelled rows of both sides: target, prediction and score (binary),
    target and served class as class *names* plus one probability column per class named by it
    (multiclass: Evidently reads the classes off those column names), or target and predicted
    value (regression)."""

    current: pd.DataFrame
    reference: pd.DataFrame | None
    both_classes: bool           # ROC AUC is undefined unless every class occurs: it is left out then
    task: str = "binary"
    probas: tuple[str, ...] = ()  # multiclass: the probability columns, one per class, in class order


def run_drift(reference: pd.DataFrame, current: pd.DataFrame, features: list[ColumnPlan],
              score: ColumnPlan | None, *, drift_share: float, threshold: float | None,
              timestamp: float, metadata: dict[str, str],
              outputs: list[ColumnPlan] | None = None) -> tuple[Snapshot | None, dict[str, ColumnVerdict]]:
    """Run the drift report on the two samples; return its snapshot and a verdict per column.
    ``outputs``: model output columns tested one by one beside the score (not in the drift share).
    ``features`` may be empty (a model whose features are all embeddings); with no column at all
    there is no report (None)."""
    singles = ([score] if score is not None else []) + list(outputs or [])
    plans = features + singles
    if not plans:
        return None, {}
    definition = DataDefinition(
        numerical_columns=[p.name for p in plans if p.kind == "numeric"],
        categorical_columns=[p.name for p in plans if p.kind == "categorical"],
    )
    pinned = {p.name: p.method for p in features if p.method is not None}
    items: list = [DataDriftPreset(columns=[p.name for p in features], drift_share=drift_share,
                                   per_column_method=pinned or None, threshold=threshold)] if features else []
    items += [ValueDrift(column=p.name, method=p.method, threshold=threshold) for p in singles]
    columns = [p.name for p in plans]
    try:
        with warnings.catch_warnings():
            # Evidently, scipy and sklearn warn about expected conditions (constant columns, one class).
            warnings.simplefilter("ignore")
            snapshot = Report(items, include_tests=True).run(
                Dataset.from_pandas(current[columns], data_definition=definition),
                Dataset.from_pandas(reference[columns], data_definition=definition),
                timestamp=datetime.fromtimestamp(timestamp, tz=timezone.utc), metadata=metadata)
    except (ValueError, TypeError, KeyError, ZeroDivisionError) as exc:
        raise DataError(f"Evidently could not compute drift: {exc}") from exc
    return snapshot, _verdicts(snapshot)


def _verdicts(snapshot: Snapshot) -> dict[str, ColumnVerdict]:
    out: dict[str, ColumnVerdict] = {}
    for result in snapshot.metric_results.values():
        params = result.metric_value_location.metric.params
        if params.get("type") != _VALUE_DRIFT:
            continue
        drift_tests = [t for t in result.tests if t.id == "drift"]
        if not drift_tests:
            raise DataError(f"Evidently returned no drift verdict for column {params['column']!r}")
        method = params.get("method")
        out[params["column"]] = ColumnVerdict(
            method=_NAME_BY_DISPLAY.get(method, method),
            score=float(result.value),
            threshold=float(params["threshold"]),
            drifted=any(getattr(t.status, "value", t.status) == "FAIL" for t in drift_tests),
        )
    return out


def run_performance(frames: PerformanceFrames, *, target: str, prediction: str, score: str,
                    timestamp: float, metadata: dict[str, str], label_drift: ColumnPlan | None = None,
                    threshold: float | None = None) -> tuple[Snapshot, dict[str, ColumnVerdict]]:
    """The task's performance metrics on labelled rows (module docstring), and the drift of the
    target column when ``label_drift`` plans it; the snapshot and that column's verdict."""
    definition, items = _performance_items(frames, target, prediction, score, quiet=label_drift is not None)
    if label_drift is not None:
        if label_drift.name not in (*definition.get_categorical_columns(), *definition.get_numerical_columns()):
            # a folded copy of the target (monitor.drift.evaluate._fold_label): a column of its own
            definition.categorical_columns = [*(definition.categorical_columns or []), label_drift.name]
        items.append(ValueDrift(column=label_drift.name, method=label_drift.method, threshold=threshold))
    ref = frames.reference
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            snapshot = Report(items, include_tests=label_drift is not None).run(
                Dataset.from_pandas(frames.current, data_definition=definition),
                None if ref is None or ref.empty else Dataset.from_pandas(ref, data_definition=definition),
                timestamp=datetime.fromtimestamp(timestamp, tz=timezone.utc), metadata=metadata)
    except (ValueError, TypeError, KeyError, ZeroDivisionError, IndexError) as exc:
        raise DataError(f"Evidently could not compute the {frames.task} performance: {exc}") from exc
    return snapshot, (_verdicts(snapshot) if label_drift is not None else {})


def _performance_items(frames: PerformanceFrames, target: str, prediction: str, score: str,
                       quiet: bool) -> tuple[DataDefinition, list]:
    """The data definition and metrics of the task (its problem type's, :data:`_REPORTS`). ``quiet``:
    the report includes tests (for the label drift verdict), so the performance metrics are given
    none of Evidently's default tests (they would judge the window against the reference sample by
    Evidently's own margins)."""
    return _REPORTS[task_of(frames.task).problem_type](frames, target, prediction, score, quiet)


def _regression_items(frames: PerformanceFrames, target: str, prediction: str, score: str,
                      quiet: bool) -> tuple[DataDefinition, list]:
    tests: dict = {"tests": []} if quiet else {}
    definition = DataDefinition(numerical_columns=[target, prediction],
                                regression=[Regression(target=target, prediction=prediction)])
    mean_tests: dict = {"mean_tests": [], "std_tests": []} if quiet else {}
    items: list = [MAE(**mean_tests), RMSE(**tests)]
    if mape_defined(frames.current[target].to_numpy("float64")):  # MAPE divides by the target
        items.append(MAPE(**mean_tests))
    items.append(R2Score(**tests))
    return definition, items


def _multiclass_items(frames: PerformanceFrames, target: str, prediction: str, score: str,
                      quiet: bool) -> tuple[DataDefinition, list]:
    tests: dict = {"tests": []} if quiet else {}
    probas = list(frames.probas)
    classification = [MulticlassClassification(name=_LABELS_TASK, target=target, prediction_labels=prediction)]
    items = [Accuracy(classification_name=_LABELS_TASK, **tests),
             F1Score(classification_name=_LABELS_TASK, **tests),
             PrecisionByLabel(classification_name=_LABELS_TASK, **({"tests": {}} if quiet else {})),
             RecallByLabel(classification_name=_LABELS_TASK, **({"tests": {}} if quiet else {}))]
    # Evidently's multiclass ROC AUC needs every class's column and, with two, takes the binary path.
    if frames.both_classes and len(probas) > 2:
        classification.append(MulticlassClassification(name=_PROBAS_TASK, target=target, prediction_probas=probas))
        items.append(RocAuc(classification_name=_PROBAS_TASK, **tests))
    return DataDefinition(numerical_columns=probas, categorical_columns=[target, prediction],
                          classification=classification), items  # type: ignore[arg-type]


def _binary_items(frames: PerformanceFrames, target: str, prediction: str, score: str,
                  quiet: bool) -> tuple[DataDefinition, list]:
    tests: dict = {"tests": []} if quiet else {}
    definition = DataDefinition(
        numerical_columns=[score],
        categorical_columns=[target, prediction],
        classification=[
            BinaryClassification(name=_LABELS_TASK, target=target, prediction_labels=prediction, pos_label=1),
            BinaryClassification(name=_PROBAS_TASK, target=target, prediction_probas=score, pos_label=1),
        ],
    )
    items = [Accuracy(classification_name=_LABELS_TASK, **tests)]
    if frames.both_classes:
        items.append(RocAuc(classification_name=_PROBAS_TASK, **tests))
    return definition, items


#: Evidently's performance report of each problem type (:attr:`monitor.tasks.Task.problem_type`; the
#: module docstring's table): the one place this module builds a report per task.
_REPORTS: dict[str, Callable[[PerformanceFrames, str, str, str, bool], tuple[DataDefinition, list]]] = {
    "classification_binary": _binary_items,
    "classification_multiclass": _multiclass_items,
    "regression": _regression_items,
}


def merge(first: Snapshot, *more: Snapshot | None, metadata: dict[str, str] | None = None) -> Snapshot:
    """One snapshot holding the metrics and widgets of several, in order (tests of all kept)."""
    models = [first.to_snapshot_model()] + [s.to_snapshot_model() for s in more if s is not None]
    if len(models) == 1 and metadata is None:
        return first
    head = models[0]
    merged = SnapshotModel(
        report=ReportModel(items=[]),
        name=head.name,
        timestamp=head.timestamp,
        metadata={**head.metadata, **(metadata or {})},
        tags=head.tags,
        metric_results={k: v for m in models for k, v in m.metric_results.items()},
        top_level_metrics=[k for m in models for k in m.top_level_metrics],
        widgets=[w for m in models for w in m.widgets],
        tests_widgets=[w for m in models for w in m.tests_widgets],
    )
    return Snapshot.load_model(merged)
