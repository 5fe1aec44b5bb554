"""A model's outputs among a file's columns: named like a prediction, score, probability, logit or
confidence (:func:`output_name`) *and* holding the values such an output holds, or a group of numbers
in [0, 1] that sum to 1 on every row, the probabilities of the classes (:func:`probability_groups`).
Inputs only are features: learning from a model's outputs is leakage, and a live service does not
send them as features.

A name alone is not enough: NannyML's credit-card data has ``credit_bureau_score`` (300 to 799) and
``app_behavioral_score`` (-7.7 to 9.8), two inputs that a name rule left out (about 12.5 accuracy
points lost). What a name says the column is decides which values it must hold (:class:`Holds`):
a probability or confidence is a number in [0, 1]; a prediction or a score is that, or looks like
the target (its values among the target's classes, or, for a target that is a quantity, numbers in
its range); a logit is a number. A column named like an output whose values are not those is an
input, and its feature's note says why (:attr:`OutputScan.inputs`)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Sequence

import numpy as np
import pandas as pd

from monitor.dataschema.columns import LeftOut, Omission
from monitor.tasks import MAX_CLASSES, PROBA_SUM_TOLERANCE


class Holds(Enum):
    """The values a column named like a model output must hold to be one."""
    UNIT = "numbers in [0, 1]"                                  # a probability, a confidence
    UNIT_OR_TARGET = "numbers in [0, 1] or values like the target's"  # a prediction, a score
    NUMBERS = "numbers"                                         # a logit: any real number


# Names a model's outputs go by (matched in lower case), with what each is, for the warning, and
# the values such an output holds.
_OUTPUT_NAMES: tuple[tuple[re.Pattern[str], str, Holds], ...] = tuple((re.compile(p), what, holds)
                                                                      for p, what, holds in (
    (r"(proba|probas|probability|probabilities)(_.*)?|probs?_.*|.*_(proba|probas|probs?|probability|probabilities)"
     r"|.*_proba_.*", "a probability", Holds.UNIT),
    (r"y_?(pred|hat).*", "a prediction", Holds.UNIT_OR_TARGET),
    (r"(pred|preds|prediction|predictions)(_.*)?|predicted.*|.*_(pred|prediction|predicted)", "a prediction",
     Holds.UNIT_OR_TARGET),
    (r"(.*_)?scores?", "a score", Holds.UNIT_OR_TARGET),
    (r"(.*_)?logits?(_.*)?", "a logit", Holds.NUMBERS),
    (r"(.*_)?confidence(_.*)?", "a confidence", Holds.UNIT),
))
_CLASS_PROBABILITY = ("a class probability", Holds.UNIT)
_TARGET_RANGE_SHARE = 0.95    # of a column's values, the share within the target's range
_MIN_PROBA_ROWS = 5           # complete rows a group of columns needs before it can read as probabilities
_PROBA_ROW_SHARE = 0.99       # of those rows, the share whose values must sum to 1
_FRACTIONAL_ROW_SHARE = 0.5   # ... and the share with a value strictly between 0 and 1 (one-hot columns are 0/1)


def output_name(name: str, classes: Sequence[str] | None = None) -> str | None:
    """What a column named ``name`` looks like when its name is a model output's (``y_pred``,
    ``score``, ``proba_<class>``, ``p_<class>`` for a class of ``classes``, ``logits``...), else None."""
    named = _named_output(name, classes)
    return named[0] if named else None


def _named_output(name: str, classes: Sequence[str] | None) -> tuple[str, Holds] | None:
    lowered = name.strip().lower()
    if classes and lowered in {f"p_{c}".lower() for c in classes}:
        return _CLASS_PROBABILITY
    return next(((what, holds) for pattern, what, holds in _OUTPUT_NAMES if pattern.fullmatch(lowered)), None)


def _numbers(series: pd.Series) -> pd.Series | None:
    """The column's present values as floats (booleans as 0/1), or None when it is not numbers."""
    present = series.dropna()
    if pd.api.types.is_bool_dtype(present.dtype):
        return present.astype("float64")
    if not pd.api.types.is_numeric_dtype(present.dtype):
        return None
    return present.astype("float64")


def _labels(series: pd.Series) -> set[str]:
    """The column's distinct values as label text: 1, 1.0 and True all read ``"1"``."""
    numbers = _numbers(series)
    if numbers is not None and bool((numbers == numbers.round()).all()):
        return {str(int(v)) for v in numbers.unique()}
    return {str(v) for v in series.dropna().unique()}


def _like_target(series: pd.Series, target: pd.Series) -> str | None:
    """What a model predicting ``target`` gives, when ``series`` holds it: values among the target's
    classes (a target of at most MAX_CLASSES values), or, for a target that is a quantity, numbers
    in its range, centred like it (the median within its middle 90%); else None."""
    classes = _labels(target)
    if len(classes) <= MAX_CLASSES:
        return "the target's classes" if _labels(series) <= classes else None
    numbers, wanted = _numbers(series), _numbers(target)
    if numbers is None or wanted is None or not len(numbers):
        return None
    inside = numbers.between(wanted.min(), wanted.max()).mean() >= _TARGET_RANGE_SHARE
    low, high = wanted.quantile([0.05, 0.95])
    return "numbers in the target's range" if inside and low <= numbers.median() <= high else None


def _output_values(series: pd.Series, holds: Holds, target: pd.Series | None) -> tuple[bool, str]:
    """Whether ``series`` holds what an output of that kind holds, and what it holds, for the user."""
    present = series.dropna()
    if not len(present):
        return True, "no values"  # nothing to judge by: the name decides (an empty column is left out anyway)
    numbers = _numbers(present)
    if numbers is not None and holds != Holds.NUMBERS and numbers.between(0.0, 1.0).all():
        return True, "numbers in [0, 1]"
    like = _like_target(present, target) if holds == Holds.UNIT_OR_TARGET and target is not None else None
    if like:
        return True, like
    if holds == Holds.NUMBERS and numbers is not None:
        return True, "numbers"
    if numbers is None:
        return False, f"text ({present.astype(str).iloc[0]!r}, ...), not {holds.value}"
    return False, f"values {numbers.min():g} to {numbers.max():g}, not {holds.value}"


def _probability_columns(data: pd.DataFrame, names: list[str]) -> list[str]:
    """Columns of ``names`` holding numbers, all within [0, 1], not constant."""
    out = []
    for name in names:
        series = data[name]
        if not pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
            continue
        present = series.dropna()
        if len(present) and present.min() >= 0.0 and present.max() <= 1.0 and present.nunique() > 1:
            out.append(name)
    return out


def _sums_to_one(data: pd.DataFrame, group: list[str]) -> bool:
    values = data[group].dropna().to_numpy(dtype="float64")
    if len(values) < _MIN_PROBA_ROWS:
        return False
    sums_to_one = np.abs(values.sum(axis=1) - 1.0) <= PROBA_SUM_TOLERANCE
    fractional = ((values > 0.0) & (values < 1.0)).any(axis=1)
    return bool(sums_to_one.mean() >= _PROBA_ROW_SHARE and fractional.mean() >= _FRACTIONAL_ROW_SHARE)


def _summing_subset(data: pd.DataFrame, candidates: list[str]) -> list[str]:
    """The columns of ``candidates`` whose sum is 1 on every row, found by least squares: the
    weights that best make 1 from the columns are 1 on such a subset and 0 elsewhere."""
    values = data[candidates].dropna().to_numpy(dtype="float64")[:10_000]
    if len(values) < max(_MIN_PROBA_ROWS, len(candidates) + 1):
        return []
    weights = np.linalg.lstsq(values, np.ones(len(values)), rcond=None)[0]
    chosen = np.abs(weights - 1.0) < 0.1
    if not np.all(chosen | (np.abs(weights) < 0.1)):
        return []
    return [c for c, take in zip(candidates, chosen) if take]


def probability_groups(data: pd.DataFrame, names: list[str]) -> list[list[str]]:
    """Groups of two or more columns of ``names`` that read as the probabilities of classes: numbers
    in [0, 1] summing to 1 on (almost) every row, not just 0/1 (one-hot columns sum to 1 too). The
    groups tried: columns sharing a prefix (``p_a, p_b``) or a suffix (``a_prob, b_prob``) before or
    after an underscore, then the subset of all such columns that sums to 1 (``a, b, c``)."""
    candidates = _probability_columns(data, names)
    tried: list[list[str]] = []
    for key in (lambda n: n.rsplit("_", 1)[0] if "_" in n else None,
                lambda n: n.split("_", 1)[1] if "_" in n else None):
        by_key: dict[str, list[str]] = {}
        for name in candidates:
            k = key(name)
            if k is not None:
                by_key.setdefault(k, []).append(name)
        tried += [g for g in by_key.values() if len(g) >= 2]
    fractional = [c for c in candidates if ((data[c] > 0.0) & (data[c] < 1.0)).any()]  # not one-hot 0/1
    if len(fractional) >= 2:
        tried.append(_summing_subset(data, fractional))
    found: list[list[str]] = []
    for group in tried:
        if 2 <= len(group) <= MAX_CLASSES and not any(set(group) <= set(g) for g in found) \
                and _sums_to_one(data, group):
            found.append(group)
    return found


@dataclass(frozen=True)
class OutputScan:
    """What :func:`model_outputs` found: the columns left out as a model's outputs, in ``names``
    order, and those named like one whose values say they are inputs (``{name: why}``)."""
    outputs: list[LeftOut]
    inputs: dict[str, str] = field(default_factory=dict)


def model_outputs(data: pd.DataFrame, names: list[str], classes: Sequence[str] | None = None,
                  target: str | None = None) -> OutputScan:
    """The columns of ``names`` that look like a model's outputs by name and values, each with why;
    ``target``: the column a prediction or a score would look like."""
    why: dict[str, str] = {}
    inputs: dict[str, str] = {}
    for name in names:
        named = _named_output(name, classes)
        if named is None:
            continue
        what, holds = named
        fits, values = _output_values(data[name], holds, data[target] if target is not None else None)
        if fits:
            why[name] = f"a model output (named like {what}, holding {values}), not an input"
        else:
            inputs[name] = f"named like {what}, but holds {values}: an input"
    for group in probability_groups(data, [n for n in names if n not in why]):
        shown = ", ".join(group[:6]) + (", ..." if len(group) > 6 else "")
        for name in group:
            why[name] = (f"a model output (numbers in [0, 1] that sum to 1 on every row with {shown}: class "
                         "probabilities)")
            inputs.pop(name, None)
    return OutputScan([LeftOut(n, why[n], Omission.MODEL_OUTPUT) for n in names if n in why], inputs)
