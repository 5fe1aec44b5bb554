"""The only module that talks to Evidently: builds the reports, runs them, reads them back.

Two reports run, because they need different rows: the *drift* report on the samples of both
sides (features with a pinned method each, plus the score column for prediction drift) and the
*performance* report on labelled rows (``Accuracy`` of the served labels, ``RocAuc`` of the
scores, with the reference's labelled rows alongside). Their results are merged into one
:class:`evidently.core.report.Snapshot` so one HTML/JSON file shows the whole check.
Evidently's exceptions are translated here into :class:`monitor.errors.DataError`.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from datetime import datetime, timezone

import pandas as pd
from evidently import BinaryClassification, DataDefinition, Dataset, Report
from evidently.core.report import Snapshot
from evidently.core.serialization import ReportModel, SnapshotModel
from evidently.legacy.calculations import stattests
from evidently.legacy.calculations.stattests.registry import register_stattest
from evidently.legacy.core import ColumnType
from evidently.metrics import Accuracy, RocAuc, ValueDrift
from evidently.presets import DataDriftPreset

from monitor.errors import DataError

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
    current: pd.DataFrame        # target, prediction, score of (a sample of) the labelled rows
    reference: pd.DataFrame | None
    both_classes: bool           # RocAuc is undefined on one class: it is left out then


def run_drift(reference: pd.DataFrame, current: pd.DataFrame, features: list[ColumnPlan],
              score: ColumnPlan | None, *, drift_share: float, threshold: float | None,
              timestamp: float, metadata: dict[str, str]) -> tuple[Snapshot, dict[str, ColumnVerdict]]:
    """Run the drift report on the two samples; return its snapshot and a verdict per column."""
    plans = features + ([score] if score is not None else [])
    definition = DataDefinition(
        numerical_columns=[p.name for p in plans if p.kind == "numeric"],
        categorical_columns=[p.name for p in plans if p.kind == "categorical"],
    )
    pinned = {p.name: p.method for p in features if p.method is not None}
    items: list = [DataDriftPreset(columns=[p.name for p in features], drift_share=drift_share,
                                   per_column_method=pinned or None, threshold=threshold)]
    if score is not None:
        items.append(ValueDrift(column=score.name, method=score.method, threshold=threshold))
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
                    timestamp: float, metadata: dict[str, str]) -> Snapshot:
    """Accuracy of the served labels and ROC AUC of the scores, on labelled rows."""
    definition = DataDefinition(
        numerical_columns=[score],
        categorical_columns=[target, prediction],
        classification=[
            BinaryClassification(name=_LABELS_TASK, target=target, prediction_labels=prediction, pos_label=1),
            BinaryClassification(name=_PROBAS_TASK, target=target, prediction_probas=score, pos_label=1),
        ],
    )
    items: list = [Accuracy(classification_name=_LABELS_TASK)]
    if frames.both_classes:
        items.append(RocAuc(classification_name=_PROBAS_TASK))
    ref = frames.reference
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return Report(items, include_tests=False).run(
                Dataset.from_pandas(frames.current, data_definition=definition),
                None if ref is None or ref.empty else Dataset.from_pandas(ref, data_definition=definition),
                timestamp=datetime.fromtimestamp(timestamp, tz=timezone.utc), metadata=metadata)
    except (ValueError, TypeError, KeyError, ZeroDivisionError, IndexError) as exc:
        raise DataError(f"Evidently could not compute accuracy/ROC AUC: {exc}") from exc


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
