"""How each task's outputs and labels are carried: column names, class names and class codes.

Bottom layer, beside :mod:`monitor.tasks.task` (what differs per task).

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
from typing import Any, Iterable, Sequence

import numpy as np

MAX_CLASSES = 100
# Integer targets with more distinct values than this read as a quantity (regression), not classes.
MAX_INTEGER_CLASSES = 20
PROBA_SUM_TOLERANCE = 0.01       # |sum of a record's class probabilities - 1| allowed on the wire
PROBA_PREFIX = "proba_"          # the client's / pyfunc's column per class: proba_<class name>
INTERNAL_PROBA_PREFIX = "__proba_"  # window frames and reference samples: __proba_<class index>

# Metric names per task, as checks, /v1/status, `driftloop check --json` and alerts.rules name them.
HIGHER_IS_BETTER = frozenset({"accuracy", "roc_auc", "precision", "recall", "f1", "macro_f1", "weighted_f1", "r2"})
LOWER_IS_BETTER = frozenset({"mae", "rmse", "mape", "residual_shift"})


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


def sorted_classes(values: Iterable[Any]) -> list[str]:
    """Distinct values as class names, numbers in numeric order first, then text."""
    names = {class_name(v) for v in values}

    def key(name: str) -> tuple[int, float, str]:
        try:
            return (0, float(name), name)
        except ValueError:
            return (1, 0.0, name)
    return sorted(names, key=key)
