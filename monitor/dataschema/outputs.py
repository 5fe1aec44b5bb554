"""A model's outputs among a file's columns: named like a prediction, score, probability, logit or
confidence (:func:`output_name`), or a group of numbers in [0, 1] that sum to 1 on every row, the
probabilities of the classes (:func:`probability_groups`). Inputs only are features: learning from a
model's outputs is leakage, and a live service does not send them as features."""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np
import pandas as pd

from monitor.dataschema.columns import LeftOut, Omission
from monitor.tasks import MAX_CLASSES, PROBA_SUM_TOLERANCE

# Names a model's outputs go by (matched in lower case), with what each is, for the warning.
_OUTPUT_NAMES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), what) for p, what in (
    (r"(proba|probas|probability|probabilities)(_.*)?|probs?_.*|.*_(proba|probas|probs?|probability|probabilities)"
     r"|.*_proba_.*", "a probability"),
    (r"y_?(pred|hat).*", "a prediction"),
    (r"(pred|preds|prediction|predictions)(_.*)?|predicted.*|.*_(pred|prediction|predicted)", "a prediction"),
    (r"(.*_)?scores?", "a score"),
    (r"(.*_)?logits?(_.*)?", "a logit"),
    (r"(.*_)?confidence(_.*)?", "a confidence"),
))
_MIN_PROBA_ROWS = 5           # complete rows a group of columns needs before it can read as probabilities
_PROBA_ROW_SHARE = 0.99       # of those rows, the share whose values must sum to 1
_FRACTIONAL_ROW_SHARE = 0.5   # ... and the share with a value strictly between 0 and 1 (one-hot columns are 0/1)


def output_name(name: str, classes: Sequence[str] | None = None) -> str | None:
    """What a column named ``name`` looks like when its name is a model output's (``y_pred``,
    ``score``, ``proba_<class>``, ``p_<class>`` for a class of ``classes``, ``logits``...), else None."""
    lowered = name.strip().lower()
    if classes and lowered in {f"p_{c}".lower() for c in classes}:
        return "a class probability"
    return next((what for pattern, what in _OUTPUT_NAMES if pattern.fullmatch(lowered)), None)


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


def model_outputs(data: pd.DataFrame, names: list[str], classes: Sequence[str] | None = None) -> list[LeftOut]:
    """The columns of ``names`` that look like a model's outputs, each with why, in ``names`` order."""
    why: dict[str, str] = {}
    for name in names:
        what = output_name(name, classes)
        if what:
            why[name] = f"a model output (named like {what}), not an input"
    for group in probability_groups(data, [n for n in names if n not in why]):
        shown = ", ".join(group[:6]) + (", ..." if len(group) > 6 else "")
        for name in group:
            why[name] = (f"a model output (numbers in [0, 1] that sum to 1 on every row with {shown}: class "
                         "probabilities)")
    return [LeftOut(n, why[n], Omission.MODEL_OUTPUT) for n in names if n in why]
