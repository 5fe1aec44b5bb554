"""Which task a target column asks for (``driftloop init`` and ``driftloop train``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from monitor.tasks.columns import MAX_CLASSES, MAX_INTEGER_CLASSES, class_name, sorted_classes


@dataclass(frozen=True)
class InferredTask:
    task: str
    classes: list[str] | None
    reason: str   # why, for driftloop.yaml's comment and the CLI


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
