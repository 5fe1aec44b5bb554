"""The column-wise checks of :mod:`monitor.records.validation`'s fast path, for every task.

Each function looks at one column of a batch (all ids, all scores, all probability lists) with
C-level ``map``/``set``/``sum`` and answers the normalised column, or ``None`` for "something is
off": the record-by-record pass then names the problem. A function here must never accept what
:mod:`monitor.records.fields` refuses, and must build the same values when it accepts (the tests
in ``tests/monitor/ingest/test_validation*.py`` hold both paths to that, property-tested).

The per-task outputs:

* binary: ``score`` in [0, 1] and an optional ``prediction`` of 0 or 1;
* regression: ``prediction``, any finite number (stored as the score);
* multiclass: ``probabilities``, a list in ``model.classes`` order or an object class -> p, each in
  [0, 1] and summing to 1 (within :data:`monitor.tasks.PROBA_SUM_TOLERANCE`); an optional
  ``prediction`` naming the served class (else the most probable one, the first on a tie).
"""
from __future__ import annotations

import math
from itertools import chain, repeat
from operator import itemgetter, mul, sub
from typing import Sequence

import numpy as np

from monitor.records import fields as F
from monitor.tasks.columns import PROBA_SUM_TOLERANCE

NUMBER = frozenset({int, float})
STR = {str}
NONE = {type(None)}
OPTIONAL_STR = frozenset({str, type(None)})
OPTIONAL_INT = frozenset({int, type(None)})
OPTIONAL_BINARY = frozenset({None, 0, 1})
# A numeric feature also takes JSON booleans, as 1.0 / 0.0 (fields.check_feature_number).
OPTIONAL_FEATURE_NUMBER = frozenset({int, float, bool, type(None)})


def clean_text(values: Sequence[str]) -> bool:
    joined = "".join(values)
    if "\x00" in joined:
        return False
    try:
        joined.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def dicts_with_keys(dicts: list, allowed: frozenset, required: frozenset) -> bool:
    """All are dicts whose keys lie between ``required`` and ``allowed``. Clients write every record
    the same way, so a batch has one or two distinct key orders: check those, not each record."""
    if set(map(type, dicts)) != {dict}:
        return False
    return all(required <= set(keys) <= allowed for keys in set(map(tuple, dicts)))


def all_finite(columns: list[list]) -> bool:
    # A NaN or an infinity anywhere makes the sum non-finite (JSON has neither; Python callers might).
    # Huge finite values can overflow the sum too: only then look at each value.
    try:
        if math.isfinite(sum(chain.from_iterable(columns))):
            return True
    except OverflowError:  # an int too large for a float
        return False
    return all(map(math.isfinite, chain.from_iterable(columns)))


def within(columns: list[list], limit: float) -> bool:
    """Every number of ``columns`` (finite, no None) has a magnitude of at most ``limit``
    (``fields.check_number``'s ``model.max_abs_value``): C-level max and min per column."""
    filled = [c for c in columns if c]
    return not filled or (max(map(max, filled)) <= limit and min(map(min, filled)) >= -limit)


def good_ids(ids: list) -> bool:
    if set(map(type, ids)) != STR or not clean_text(ids):
        return False
    lengths = list(map(len, ids))
    return min(lengths) >= 1 and max(lengths) <= F.MAX_ID_LENGTH


def timestamps(raw: list, now: int) -> tuple[list[int], list[bool]] | None:
    n = len(raw)
    types = set(map(type, raw))
    if types == NONE:
        return [now] * n, [False] * n
    if types <= NUMBER:
        if not (all_finite([raw]) and min(raw) >= 0 and max(raw) < F.MAX_EPOCH_SECONDS):
            return None
        # The same arithmetic as fields.check_ts, so both paths store the same microsecond.
        us = list(map(round, map(mul, raw, repeat(1_000_000))))
        if us and max(us) >= F.MAX_EPOCH_SECONDS * 1_000_000:  # rounded up onto the bound: check_ts names it
            return None
        return us, [True] * n
    return [now if v is None else F.check_ts(v) for v in raw], [v is not None for v in raw]


def versions(raw: list) -> list | None:
    types = set(map(type, raw))
    if types == NONE:
        return raw
    if not types <= {str, type(None)}:
        return None  # integers and bad values: the slow path normalises or names them
    texts = [v for v in raw if v is not None]
    if not clean_text(texts) or min(map(len, texts)) < 1 or max(map(len, texts)) > F.MAX_VERSION_LENGTH:
        return None
    return raw


def numbers(raw: list, low: float = -math.inf, high: float = math.inf) -> list[float] | None:
    """Finite numbers (no booleans: ``fields.check_number``) within [low, high], as floats."""
    types = set(map(type, raw))
    if not types <= NUMBER:
        return None
    out = list(map(float, raw)) if int in types else raw  # OverflowError: the caller's slow path
    if not all_finite([out]) or (out and (min(out) < low or max(out) > high)):
        return None
    return out


def class_indices(raw: list, index: dict[str, int] | None) -> list[int] | None:
    """Class names (or integers equal to one: ``monitor.tasks.class_name``) -> their indices; None
    when any is unknown or of another type (the slow path names it)."""
    if index is None:
        return None
    types = set(map(type, raw))
    if types <= STR:  # text, or nothing at all
        names = raw
    elif types == {int}:
        names = list(map(str, raw))
    else:
        return None
    out = list(map(index.get, names))
    return None if None in out else out  # type: ignore[return-value]  # no None left


def binary_outputs(records: list, threshold: float) -> tuple[list, list, list, None] | None:
    """score in [0, 1], prediction 0/1 or derived from the threshold."""
    n = len(records)
    scores = numbers(list(map(itemgetter("score"), records)), 0.0, 1.0)
    if scores is None:
        return None
    raw = list(map(dict.get, records, repeat("prediction", n)))
    if not set(map(type, raw)) <= OPTIONAL_INT or not set(raw) <= OPTIONAL_BINARY:
        return None
    given = [p is not None for p in raw]
    preds = raw if all(given) else [int(sc > threshold) if p is None else p for p, sc in zip(raw, scores)]
    return scores, preds, given, None


def regression_outputs(records: list) -> tuple[list, list, list, None] | None:
    """The predicted value, stored as the score; the class column is unused (0)."""
    values = numbers(list(map(itemgetter("prediction"), records)))
    if values is None:
        return None
    n = len(records)
    return values, [0] * n, [True] * n, None


def multiclass_outputs(records: list, classes: list[str] | None,
                       index: dict[str, int] | None) -> tuple[list, list, list, list[list[float]]] | None:
    """Each row's probabilities (in ``classes`` order), the served class and its probability."""
    if classes is None or index is None:
        return None
    n, k = len(records), len(classes)
    raw = list(map(itemgetter("probabilities"), records))
    kinds = set(map(type, raw))
    if not kinds <= {list, dict}:
        return None
    lists = [v for v in raw if type(v) is list] if dict in kinds else raw
    if lists and set(map(len, lists)) != {k}:
        return None
    if dict in kinds:
        # Objects class -> p: exactly the classes as keys (JSON keys are text; a key such as "3.0"
        # that names class "3" only through class_name takes the slow path).
        wanted = set(classes)
        if any(len(keys) != k or set(keys) != wanted for keys in set(map(tuple, (v for v in raw if type(v) is dict)))):
            return None
        get = itemgetter(*classes)  # a model has at least two classes: a tuple per object
        rows = [v if type(v) is list else list(get(v)) for v in raw]
    else:
        rows = raw
    if not set(map(type, chain.from_iterable(rows))) <= NUMBER:  # no booleans, text or null
        return None
    try:
        table = np.array(rows, dtype=np.float64)  # n x k; an int too large for a float: OverflowError
    except (OverflowError, ValueError):
        return None
    if not np.isfinite(table).all() or table.min() < 0.0 or table.max() > 1.0:
        return None
    # math.fsum per row, as fields' check: exact, so both paths draw the tolerance's line alike.
    if max(map(abs, map(sub, map(math.fsum, table.tolist()), repeat(1.0)))) > PROBA_SUM_TOLERANCE:
        return None
    raw_pred = list(map(dict.get, records, repeat("prediction", n)))
    given = [p is not None for p in raw_pred]
    argmax = table.argmax(axis=1)  # the first of equal maxima, as the slow path
    if any(given):
        named = class_indices([p for p in raw_pred if p is not None], index)
        if named is None:
            return None
        argmax[np.flatnonzero(given)] = named
    preds = argmax.tolist()
    scores = table[np.arange(n), argmax].tolist()
    return scores, preds, given, table.T.tolist()
