"""What kind of model a model is: its ``task``, one of ``binary``, ``multiclass`` or ``regression``.

Bottom layer: every part consults the task through these few helpers instead of growing a copy of
the binary path (STYLE.md, habit 15).

How each task is carried, once and for all:

============  ==========================  ===========================  ============================
task          on the wire (prediction)    stored / in window frames    label
============  ==========================  ===========================  ============================
binary        ``score`` P(1), optional    ``score``, ``prediction``    0 or 1 (or one of the two
              ``prediction`` 0/1          0/1                          ``model.classes``)
multiclass    ``probabilities`` (class    ``prediction`` and target as  a class of ``model.classes``
              -> p, or a list in class    class *index*; ``score`` the
              order), optional            probability of the served
              ``prediction`` (a class)    class; one ``__proba_<i>``
                                          column per class index
regression    ``prediction`` (a number)   ``score`` and ``prediction``  a number
                                          both the predicted value
============  ==========================  ===========================  ============================

Internal frames use class *indices* (into ``model.classes``); people and services see class
*names*: on the wire, in the client's DataFrames (``proba_<class>`` columns) and in the pyfunc's
output. :func:`class_codes` turns names into indices at those edges.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Literal, Sequence

import numpy as np
import pandas as pd

Task = Literal["binary", "multiclass", "regression"]
TASKS: tuple[str, ...] = ("binary", "multiclass", "regression")
MAX_CLASSES = 100
# Integer targets with more distinct values than this read as a quantity (regression), not classes.
MAX_INTEGER_CLASSES = 20
PROBA_SUM_TOLERANCE = 0.01       # |sum of a record's class probabilities - 1| allowed on the wire
PROBA_PREFIX = "proba_"          # the client's / pyfunc's column per class: proba_<class name>
INTERNAL_PROBA_PREFIX = "__proba_"  # window frames and reference samples: __proba_<class index>

# Metric names per task, as checks, /v1/status, `driftloop check --json` and alerts.rules name them.
HIGHER_IS_BETTER = frozenset({"accuracy", "roc_auc", "precision", "recall", "f1", "macro_f1", "weighted_f1", "r2"})
LOWER_IS_BETTER = frozenset({"mae", "rmse", "mape"})


def is_classification(task: str) -> bool:
    return task != "regression"


def internal_proba_column(index: int) -> str:
    """The window frame's column of class ``index``'s probability."""
    return f"{INTERNAL_PROBA_PREFIX}{index}"


def internal_proba_columns(n_classes: int) -> list[str]:
    return [internal_proba_column(i) for i in range(n_classes)]


def proba_column(name: str) -> str:
    """The column of class ``name``'s probability in the client's and pyfunc's DataFrames."""
    return f"{PROBA_PREFIX}{name}"


def class_name(value: Any) -> str:
    """A class as text: ``3``, ``3.0`` and ``"3"`` are one class; ``True`` is ``"1"``."""
    if isinstance(value, (bool, np.bool_)):
        return "1" if value else "0"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer():
        return str(int(value))
    return str(value)


def class_codes(values: Iterable[Any], classes: Sequence[str]) -> tuple[np.ndarray, list[int]]:
    """Class indices of ``values`` (names or numbers), and the positions of values that are no
    class of ``classes`` (their code is -1). Missing values (None, NaN) are unknown too."""
    index = {c: i for i, c in enumerate(classes)}
    codes, bad = [], []
    for pos, v in enumerate(values):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            code = -1
        else:
            code = index.get(class_name(v), -1)
        if code < 0:
            bad.append(pos)
        codes.append(code)
    return np.asarray(codes, dtype=np.int64), bad


@dataclass(frozen=True)
class InferredTask:
    task: str
    classes: list[str] | None
    reason: str   # why, for driftloop.yaml's comment and the CLI


def sorted_classes(values: Iterable[Any]) -> list[str]:
    """Distinct values as class names, numbers in numeric order first, then text."""
    names = {class_name(v) for v in values}

    def key(name: str) -> tuple[int, float, str]:
        try:
            return (0, float(name), name)
        except ValueError:
            return (1, 0.0, name)
    return sorted(names, key=key)


def infer_task(target: pd.Series) -> InferredTask | str:
    """The task a target column asks for, or a one-line problem. Rules:

    * two distinct values -> ``binary`` (0/1 or booleans as they are; two other values are recorded
      as ``classes`` [negative, positive], the second in sorted order being the positive class);
    * text, booleans or categories with 3 to 100 distinct values -> ``multiclass``;
    * integers with 3 to ``MAX_INTEGER_CLASSES`` distinct values -> ``multiclass`` (class ids such
      as CIFAR-10's 0-9); with more they are a quantity -> ``regression``;
    * any other number -> ``regression``.
    """
    present = target.dropna()
    name = target.name
    if len(present) == 0:
        return f"target {name!r} has no values"
    distinct = present.unique()
    k = len(distinct)
    numeric = pd.api.types.is_numeric_dtype(present.dtype) and not pd.api.types.is_bool_dtype(present.dtype)
    if k == 1:
        return f"target {name!r} has a single value ({class_name(distinct[0])}); need at least two to learn"
    if k == 2:
        classes = sorted_classes(distinct)
        if set(classes) == {"0", "1"}:
            return InferredTask("binary", None, "two values, 0 and 1")
        return InferredTask("binary", classes, f"two values; {classes[1]!r} is the positive class (label 1)")
    if numeric:
        values = present.to_numpy(dtype="float64")
        integer = bool(np.all(values == np.round(values)))
        if not integer:
            return InferredTask("regression", None, f"a continuous number ({k} distinct values)")
        if k > MAX_INTEGER_CLASSES:
            return InferredTask("regression", None, f"integers with {k} distinct values: a quantity "
                                f"(over {MAX_INTEGER_CLASSES}; set model.task: multiclass if these are class ids)")
        return InferredTask("multiclass", sorted_classes(distinct),
                            f"integers with {k} distinct values: class ids (set model.task: regression if "
                            "they are a quantity)")
    if k > MAX_CLASSES:
        return (f"target {name!r} has {k} distinct text values: more than {MAX_CLASSES} classes; "
                "driftloop monitors up to 100 classes")
    return InferredTask("multiclass", sorted_classes(distinct), f"{k} distinct classes")
