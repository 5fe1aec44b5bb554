"""A file's schema: its features and the columns left out (:func:`infer_schema`), by the column
rules (:mod:`monitor.dataschema.columns`) and the model-output rules
(:mod:`monitor.dataschema.outputs`), and the task its target asks for (:func:`resolve_task`)."""
from __future__ import annotations

import shlex
from typing import Sequence

import pandas as pd

from monitor.dataschema.columns import InferredFeature, InferredSchema, LeftOut, Omission, infer_column
from monitor.dataschema.ids import integer_id
from monitor.dataschema.outputs import model_outputs
from monitor.errors import DataError
from monitor.tasks import InferredTask, infer_task, task_of

SAMPLE_ROWS = 100_000      # rows looked at; enough to see every common category
# Names a record (or a window's frame) uses for itself, and why: a feature may not take them.
RESERVED_COLUMNS = {"id": "on the wire a record's id is always the key id", "ts": "the prediction's time",
                    "label_ts": "the label's time", "score": "the model's score column (model.score)",
                    "prediction": "the model's predicted label (model.prediction)"}


def resolve_task(target: pd.Series, task: str | None = None) -> InferredTask:
    """The task ``target`` asks for (:func:`monitor.tasks.infer_task`), or ``task`` as asked, checked
    against the values (binary: two; multiclass: 2-100 classes; regression: numbers). DataError
    naming the target when they do not fit."""
    inferred = infer_task(target)
    if task is None:
        if isinstance(inferred, str):
            raise DataError(inferred)
        return inferred
    if isinstance(inferred, InferredTask) and inferred.task == task:
        return InferredTask(task, inferred.classes, f"{inferred.reason}; chosen with --task")
    return task_of(task).fit_target(target)


def infer_features(data: pd.DataFrame, target: str, *, id: str | None = "id",
                   ignore: list[str] | tuple[str, ...] = ()) -> list[InferredFeature]:
    """The features of ``data`` (every column but target, id, ignored and left-out ones), by the
    rules in :mod:`monitor.dataschema`'s docstring. DataError listing every problem at once when a
    column cannot be used."""
    return infer_schema(data, target, id=id, ignore=ignore).features


def infer_schema(data: pd.DataFrame, target: str, *, id: str | None = "id",
                 ignore: list[str] | tuple[str, ...] = (), keep: list[str] | tuple[str, ...] = (),
                 classes: Sequence[str] | None = None) -> InferredSchema:
    """The features of ``data`` and the columns left out: for carrying no signal (constant, all missing), for
    looking like a model's outputs (:func:`model_outputs`; ``classes`` name its ``p_<class>`` columns) or a
    record id besides ``id`` (:func:`integer_id`), unless in ``keep``. DataError listing every problem at once
    when a column cannot be used."""
    columns = [str(c) for c in data.columns]
    absent = [c for c in [target, *ignore, *keep] if c not in columns]
    if id not in (None, "id") and id not in columns:
        absent.append(id)
    if absent:
        raise DataError(f"the data has no column(s) {', '.join(absent)} (has: {', '.join(columns[:20])})")
    sample = data if len(data) <= SAMPLE_ROWS else data.sample(SAMPLE_ROWS, random_state=0)
    skip = {target, id, *ignore}
    scan = model_outputs(sample, [c for c in columns if c not in skip], classes, target)
    outputs = [c for c in scan.outputs if c.name not in keep]
    kept = {c.name for c in scan.outputs if c.name in keep}  # a feature as asked; its note says what it looks like
    skip |= {c.name for c in outputs}
    found, problems = [], []
    left_out: list[LeftOut] = list(outputs)
    for name in columns:
        if name in skip:
            continue
        # Constant on the sample is not constant on the file: judge that on every row.
        result = infer_column(name, sample[name])
        if isinstance(result, LeftOut) and len(sample) < len(data):
            result = infer_column(name, data[name])
        if isinstance(result, LeftOut):
            left_out.append(result)
            continue
        if name in RESERVED_COLUMNS:  # the reason that holds whatever the values (a text id, dates)
            record_id = f", --id {name} if it is the record id," if name == "id" else ""
            problems.append(f"column {name!r} has a name reserved for {RESERVED_COLUMNS[name]}, so it cannot be a "
                            f"feature: pass --ignore {shlex.quote(name)}{record_id} or rename the column in your data "
                            f"(e.g. {name}_value) to keep it as a feature")
            continue
        if isinstance(result, str):
            problems.append(result)
            continue
        another_id = integer_id(name, data[name]) if result.type == "numeric" else None
        if another_id and name not in keep:  # a second id (the first is ``id``): it would drift for ever
            left_out.append(LeftOut(name, f"a record id ({another_id}), not a feature: every later row brings a "
                                          "value training never saw", Omission.RECORD_ID))
            continue
        if another_id:
            result = InferredFeature(name, result.type, f"{result.note}; looks like a record id, kept by --keep")
        try:
            result.spec()
        except ValueError:
            problems.append(f"column {name!r} is not usable as a feature name (letters, digits and _, not "
                            f"starting with a digit); rename it or pass --ignore {shlex.quote(name)}")
            continue
        if name in kept:
            result = InferredFeature(name, result.type, f"{result.note}; looks like a model output, kept by --keep")
        elif name in scan.inputs:
            result = InferredFeature(name, result.type, f"{result.note}; {scan.inputs[name]}", result.dim)
        found.append(result)
    if not found and not problems:
        dropped = f" ({', '.join(f'{c.name}: {c.why}' for c in left_out)})" if left_out else ""
        problems.append(f"no feature columns left besides the target {target!r}{dropped}")
    if problems:
        raise DataError("; ".join(problems))
    left_out.sort(key=lambda c: columns.index(c.name))  # file order, as the features
    return InferredSchema(found, left_out, tuple(f.name for f in found if f.name in kept))
