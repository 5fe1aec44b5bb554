"""Which columns a check tests for drift and how, per task (:mod:`monitor.tasks`): the features and
the score (as ever), a multiclass model's outputs, and the labels; and the labelled frames the
performance report reads.

Each column's stattest is decided on the full data (:mod:`monitor.drift.methods`), so a sampled run
gives the verdict of an unsampled one.

* **Output drift** (multiclass): the served class's distribution (categorical) and each class's
  probability (numeric). At most ``MAX_PROBABILITY_COLUMNS`` probabilities are tested, those of the
  classes most probable on the reference sample; the others are listed as skipped, with the reason.
  A regression model's output is its score column, which prediction drift tests already.
* **Label drift** (multiclass and regression, once the window has labels): the labelled rows'
  target, the class or the number, reference against window: a prior shift. It runs in the
  performance report, because only labelled rows have a target, on samples of at most
  ``drift.sample_size`` labelled rows per side.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from monitor.config import DriftConfig, ModelConfig
from monitor.drift.frames import (Labelled, PreparedReference, Side, class_names, probability_columns,
                                  sample_positions)
from monitor.drift.methods import (CATEGORICAL, FEW_VALUES_BINARY, NUMERIC, SMALL_REFERENCE, default_method,
                                   distinct_values, union_distinct)
from monitor.drift.runner import CHISQUARE_TWO_SAMPLE, ColumnPlan, PerformanceFrames
from monitor.tasks import proba_column

MAX_PROBABILITY_COLUMNS = 20   # a 100-class model gets 20 probability tests, not 100, per check
SKIPPED_CLASS = f"not among the {MAX_PROBABILITY_COLUMNS} classes most probable on the reference"


def column_method(kind: str, reference_count: int, distinct: int) -> str | None:
    """The stattest Evidently would pick on the full data (``distinct``: values of both sides, capped)."""
    method = default_method(kind, reference_count, distinct)
    # Evidently's chisquare treats the reference's frequencies as exact. It is its choice for
    # categories against a small reference, and (left unpinned) for a numeric column with 3 to 5
    # distinct values against one, which Evidently tests as categorical: both get the two-sample test.
    few_valued = (kind == NUMERIC and method is None and reference_count <= SMALL_REFERENCE
                  and distinct > FEW_VALUES_BINARY)
    if method == "chisquare" or few_valued:
        method = CHISQUARE_TWO_SAMPLE.name
    return method


def _configured(kind: str, drift_cfg: DriftConfig) -> str | None:
    return drift_cfg.num_method if kind == NUMERIC else drift_cfg.cat_method


def plan(name: str, kind: str, ref: PreparedReference, cur: Side, values: pd.Series | None,
         drift_cfg: DriftConfig) -> ColumnPlan | str:
    """The plan of one column of the samples, or why it cannot be tested. ``values``: the current
    side's values of the column (all rows when at hand, else the sample's), for its distinct values."""
    if ref.side.counts.get(name, 0) == 0:
        return "no values in the reference"
    if cur.counts.get(name, 0) == 0 or values is None:
        return "no values in the current window"
    method = _configured(kind, drift_cfg)
    if method is None:
        method = column_method(kind, ref.full_counts[name], union_distinct(ref.distinct[name], values))
    return ColumnPlan(name, kind, method)


def _most_probable(sample: pd.DataFrame, columns: list[str]) -> list[int]:
    """Class indices by mean probability on the reference sample, highest first (ties: class order)."""
    if not all(c in sample.columns for c in columns):
        return list(range(len(columns)))
    means = sample[columns].mean().to_numpy(dtype=np.float64)
    return sorted(range(len(columns)), key=lambda i: (-np.nan_to_num(means[i], nan=-1.0), i))


def output_plans(ref: PreparedReference, cur: Side, model_cfg: ModelConfig,
                 drift_cfg: DriftConfig) -> list[tuple[str, ColumnPlan | str]]:
    """``(name people see, plan)`` of each output column of a model with class probabilities (a
    multiclass one, module docstring); none for other tasks (their output is the score)."""
    if not model_cfg.kind.proba_columns(model_cfg.n_classes):
        return []
    pred = model_cfg.prediction
    out: list[tuple[str, ColumnPlan | str]] = [
        (pred, plan(pred, CATEGORICAL, ref, cur, cur.sample.get(pred), drift_cfg))]
    columns = probability_columns(model_cfg)
    tested = set(_most_probable(ref.side.sample, columns)[:MAX_PROBABILITY_COLUMNS])
    for i, (column, name) in enumerate(zip(columns, class_names(model_cfg))):
        out.append((proba_column(name), plan(column, NUMERIC, ref, cur, cur.sample.get(column), drift_cfg)
                    if i in tested else SKIPPED_CLASS))
    return out


def label_plan(ref: PreparedReference, labelled: Labelled | None, model_cfg: ModelConfig, drift_cfg: DriftConfig,
               column: str) -> ColumnPlan | str | None:
    """The label drift plan of the performance frames' target ``column``, or why it cannot be
    tested; None for a task whose labels are not tested (binary) and for a window without labels."""
    kind = model_cfg.kind.label_drift_kind   # categorical (multiclass) or numeric (regression)
    if kind is None or labelled is None or not len(labelled):
        return None
    reference = ref.side.labelled
    if reference is None or not len(reference):
        return "no labelled rows in the reference"
    method = _configured(kind, drift_cfg)
    if method is None:
        distinct = union_distinct(distinct_values(pd.Series(reference.y)), pd.Series(labelled.y))
        method = column_method(kind, len(reference), distinct)
    return ColumnPlan(column, kind, method)


def evidently_columns(model_cfg: ModelConfig) -> tuple[str, str]:
    """The target and prediction columns of the performance frames. A multiclass frame also has a
    column per class named by the class (Evidently reads the classes off them), so a class named
    like the target or prediction column moves those aside."""
    names = set(model_cfg.kind.report_class_columns(class_names(model_cfg)))
    target = model_cfg.target if model_cfg.target not in names else "__target"
    prediction = model_cfg.prediction if model_cfg.prediction not in names else "__prediction"
    return target, prediction


def performance_frames(ref: PreparedReference, labelled: Labelled, model_cfg: ModelConfig, sample_size: int,
                       rng: np.random.Generator) -> PerformanceFrames:
    """Samples of at most ``sample_size`` labelled rows per side, shaped for the task's report
    (:meth:`monitor.tasks.Task.report_frame`). Class probabilities go in when both sides have them."""
    task = model_cfg.kind
    cur_pos = sample_positions(len(labelled), sample_size, rng)
    reference = ref.side.labelled if ref.side.labelled is not None and len(ref.side.labelled) else None
    ref_pos = sample_positions(len(reference), sample_size, rng) if reference is not None else None
    probas = labelled.proba is not None and (reference is None or reference.proba is not None)
    names = class_names(model_cfg)
    target, prediction = evidently_columns(model_cfg)

    def frame(rows: Labelled, positions: np.ndarray | None) -> pd.DataFrame:
        sl = slice(None) if positions is None else positions
        proba = rows.proba[sl] if probas and rows.proba is not None else None
        return pd.DataFrame(task.report_frame(rows.y[sl], rows.pred[sl], rows.score[sl], proba, names,
                                              (target, prediction, model_cfg.score)))
    current = frame(labelled, cur_pos)
    ref_frame = None if reference is None else frame(reference, ref_pos)
    return PerformanceFrames(current, ref_frame, both_classes=current[target].nunique() == model_cfg.n_classes,
                             task=task, probas=tuple(task.report_class_columns(names)) if probas else ())
