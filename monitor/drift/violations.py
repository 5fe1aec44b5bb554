"""A window checked against the model's constraints file (:mod:`monitor.drift.constraints`): the
violations, SageMaker Model Monitor's kinds, each naming its column.

=========================  ===================================================================
``data_type_check``        values of another type than ``inferred_type`` (a fraction in an integral
                           column, text in a numeric one, a vector of another length than ``dim``)
                           are more than ``data_type_threshold`` of the column's values
``completeness_check``     the share of rows with a value is below ``completeness``
``range_check``            values below ``min``, above ``max`` or negative with ``is_non_negative``
                           are more than ``range_threshold`` of the column's values
``categorical_values_      values not in ``categories`` are more than
check``                    ``categorical_values_threshold`` of the column's values
``missing_column_check``   the window lacks the column, or no row has a value (the sender stopped
                           sending it; not for the label, whose values arrive late): its other
                           checks are then not run
``extra_column_check``     a column of the model that the file does not list (a feature added since
                           the file was written); ``"monitoring": false`` on a column keeps it quiet
=========================  ===================================================================

A violation's ``rows`` and ``share`` count the violating rows (a missing or extra column: every row)
and the share of the rows the check looked at: the window's for completeness, the column's values
for the others. ``example_values`` lists at most ``max_examples`` of them: the farthest outside the
range, the most frequent unknown categories, the first values of another type.

Cost: one vectorised pass per column over the whole window (no sample): a comparison per numeric
value, one ``pd.factorize`` per categorical column, a length per embedding vector.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd

from monitor.config import ModelConfig
from monitor.drift.constraints import (NUMERIC_TYPES, CheckKind, ColumnConstraints, ColumnType, ConstraintsFile,
                                       MonitoringConfig, Role, column_values, monitored_columns, numbers, present)
from monitor.finite import finite

log = logging.getLogger(__name__)

MAX_EXAMPLE_CHARS = 120  # a category shown as an example is cut here


@dataclass(frozen=True)
class Violation:
    """One column breaking one kind of constraint in a window. ``expected`` is the constraint
    (the type, the least completeness, ``{min, max, is_non_negative}``, the number of categories),
    ``observed`` what the window had (its values' type, completeness, ``{min, max}``, the number of
    unknown categories)."""

    column: str
    check: CheckKind
    rows: int
    share: float
    expected: Any = None
    observed: Any = None
    examples: tuple[Any, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"column": self.column, "check": self.check.value, "rows": int(self.rows),
                "share": finite(self.share), "expected": self.expected, "observed": self.observed,
                "example_values": list(self.examples)}


@dataclass(frozen=True)
class ConstraintCheck:
    """The window against the constraints file at ``file``: the columns checked and the violations,
    or the ``problem`` that kept the file from being used (nothing checked; the check goes on)."""

    file: str
    champion_version: str | None = None   # the champion version the file was suggested from
    columns: int = 0                      # columns checked
    violations: tuple[Violation, ...] = ()
    problem: str | None = None
    seconds: float = 0.0
    kinds: tuple[CheckKind, ...] = field(default=tuple(CheckKind))  # the kinds evaluated (all, less those off)

    @property
    def valid(self) -> bool:
        return self.problem is None

    def count(self, kind: CheckKind) -> int:
        """Columns violating ``kind``."""
        return sum(1 for v in self.violations if v.check is kind)

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "champion_version": self.champion_version, "valid": self.valid,
                "problem": self.problem, "columns": int(self.columns),
                "checks": [k.value for k in self.kinds],
                "violations": [v.to_dict() for v in self.violations], "seconds": finite(self.seconds)}


def check_constraints(file: ConstraintsFile, window: pd.DataFrame, model_cfg: ModelConfig) -> ConstraintCheck:
    """Evaluate ``window`` (a store window) against ``file``'s constraints."""
    started = time.perf_counter()
    constraints = file.constraints
    if constraints is None:
        log.warning("constraints not checked: %s", file.problem)
        return ConstraintCheck(file.path, problem=file.problem or "no constraints", kinds=())
    config = constraints.monitoring_config
    if not config.evaluate_constraints:
        return ConstraintCheck(file.path, constraints.champion_version, kinds=())
    roles = monitored_columns(model_cfg)
    violations: list[Violation] = []
    checked = 0
    for name, column in constraints.columns.items():
        if not column.monitoring:
            continue
        checked += 1
        role = roles.get(name, column.role or Role.FEATURE)
        violations += _column(window, name, role, column, config, model_cfg)
    if config.on(CheckKind.EXTRA_COLUMN):
        violations += [Violation(name, CheckKind.EXTRA_COLUMN, len(window), 1.0, observed="not in the file")
                       for name in roles if name in window.columns and name not in constraints.columns]
    kinds = tuple(k for k in CheckKind if config.on(k))
    return ConstraintCheck(file.path, constraints.champion_version, checked, tuple(violations),
                           seconds=time.perf_counter() - started, kinds=kinds)


def _column(window: pd.DataFrame, name: str, role: Role, column: ColumnConstraints, config: MonitoringConfig,
            model_cfg: ModelConfig) -> list[Violation]:
    n = len(window)
    on = lambda kind: column.on(kind, config)  # noqa: E731
    if name not in window.columns:
        return [Violation(name, CheckKind.MISSING_COLUMN, n, 1.0, observed="absent")] if on(
            CheckKind.MISSING_COLUMN) else []
    values = column_values(window, name, role, model_cfg)
    has = present(values)
    k = int(has.sum())
    expected_some = column.completeness is None or column.completeness > 0
    if k == 0 and n and role is not Role.LABEL and expected_some and on(CheckKind.MISSING_COLUMN):
        return [Violation(name, CheckKind.MISSING_COLUMN, n, 1.0, observed="no value in any row")]
    out = []
    if column.completeness is not None and n and on(CheckKind.COMPLETENESS):
        observed = k / n
        if observed < column.completeness:
            out.append(Violation(name, CheckKind.COMPLETENESS, n - k, 1.0 - observed, expected=column.completeness,
                                 observed=round(observed, 6)))
    if k == 0:
        return out
    kept = values if k == n else values[has]
    if column.inferred_type in NUMERIC_TYPES:
        out += _numeric(name, kept, column, config, on)
    elif column.inferred_type is ColumnType.STRING:
        if column.categories is not None and on(CheckKind.CATEGORICAL_VALUES):
            out += _categories(name, kept, column.categories, config)
    elif column.dim is not None and on(CheckKind.DATA_TYPE):
        out += _vectors(name, kept, column.dim, config)
    return out


def _numeric(name: str, kept: pd.Series, column: ColumnConstraints, config: MonitoringConfig,
             on: Callable[[CheckKind], bool]) -> list[Violation]:
    out = []
    x = numbers(kept)
    k = len(x)
    finite_x = np.isfinite(x)
    if on(CheckKind.DATA_TYPE):
        bad = np.isnan(x)  # a value that is not a number
        if column.inferred_type is ColumnType.INTEGRAL:
            with np.errstate(invalid="ignore"):
                bad |= ~finite_x | (x != np.floor(x))
        rows = int(bad.sum())
        if rows and rows / k > config.data_type_threshold:
            observed = ColumnType.STRING if np.isnan(x).any() else ColumnType.FRACTIONAL
            out.append(Violation(name, CheckKind.DATA_TYPE, rows, rows / k, expected=column.inferred_type.value,
                                 observed=observed.value, examples=_first(kept[bad], config.max_examples)))
    low = column.min if column.min is not None else (0.0 if column.is_non_negative else None)
    if column.is_non_negative and low is not None:
        low = max(low, 0.0)
    high = column.max
    if (low is not None or high is not None) and on(CheckKind.RANGE):
        numeric = x[~np.isnan(x)]
        with np.errstate(invalid="ignore"):  # an infinity against an open side: NaN, not outside
            excess = np.maximum((-np.inf if low is None else low) - numeric,
                                numeric - (np.inf if high is None else high))
        outside = excess > 0
        rows = int(outside.sum())
        if rows and rows / k > config.range_threshold:
            far = _farthest(numeric[outside], excess[outside], config.max_examples)
            out.append(Violation(name, CheckKind.RANGE, rows, rows / k,
                                 expected={"min": column.min, "max": column.max,
                                           "is_non_negative": column.is_non_negative},
                                 observed={"min": finite(numeric.min()), "max": finite(numeric.max())},
                                 examples=far))
    return out


def _farthest(values: np.ndarray, excess: np.ndarray, limit: int) -> tuple[Any, ...]:
    """Up to ``limit`` distinct values, the farthest outside the range first."""
    if limit <= 0 or not len(values):
        return ()
    take = min(len(values), limit * 4)
    top = np.argpartition(-excess, take - 1)[:take] if take < len(values) else np.arange(len(values))
    top = top[np.argsort(-excess[top], kind="stable")]
    found: list[Any] = []
    for v in values[top]:
        shown = finite(v) if np.isfinite(v) else str(v)
        if shown not in found:
            found.append(shown)
        if len(found) == limit:
            break
    return tuple(found)


def _categories(name: str, kept: pd.Series, categories: list[str], config: MonitoringConfig) -> list[Violation]:
    codes, uniques = pd.factorize(kept, use_na_sentinel=True)
    labels = np.asarray([str(u) for u in uniques], dtype=object)
    unknown = ~np.isin(labels, np.asarray(categories, dtype=object))
    if not unknown.any():
        return []
    counts = np.bincount(codes[codes >= 0], minlength=len(labels))
    rows = int(counts[unknown].sum())
    k = len(kept)
    if rows / k <= config.categorical_values_threshold:
        return []
    order = np.flatnonzero(unknown)[np.argsort(-counts[unknown], kind="stable")]
    examples = tuple(_text(labels[i]) for i in order[: config.max_examples])
    return [Violation(name, CheckKind.CATEGORICAL_VALUES, rows, rows / k, expected={"categories": len(categories)},
                      observed={"unknown_categories": int(unknown.sum())}, examples=examples)]


def _vectors(name: str, kept: pd.Series, dim: int, config: MonitoringConfig) -> list[Violation]:
    lengths = np.fromiter((np.size(v) for v in kept.to_numpy(dtype=object)), dtype=np.int64, count=len(kept))
    bad = lengths != dim
    rows = int(bad.sum())
    if not rows or rows / len(kept) <= config.data_type_threshold:
        return []
    seen = sorted({int(v) for v in np.unique(lengths[bad])})[: max(config.max_examples, 1)]
    return [Violation(name, CheckKind.DATA_TYPE, rows, rows / len(kept), expected=f"embedding of dim {dim}",
                      observed=f"vectors of length {', '.join(map(str, seen))}")]


def _first(values: pd.Series, limit: int) -> tuple[Any, ...]:
    found: list[Any] = []
    for v in values.iloc[: limit * 4].tolist():
        shown = finite(v) if isinstance(v, (int, float, np.number)) and finite(v) is not None else _text(v)
        if shown not in found:
            found.append(shown)
        if len(found) == limit:
            break
    return tuple(found)


def _text(value: Any) -> str:
    text = str(value)
    return text if len(text) <= MAX_EXAMPLE_CHARS else text[: MAX_EXAMPLE_CHARS - 1] + "…"
