"""Constraints on a model's columns, as SageMaker Model Monitor keeps them: a JSON file suggested from
the champion's baseline (``driftloop baseline-constraints``), edited by people, read by every check
(:mod:`monitor.drift.violations` checks a window against it).

The file (``drift.constraints``; by default ``<home>/constraints/<model>.json``, used when it exists)::

    {"version": 1, "model": "churn", "champion_version": "3", "created_at": "...", "baseline_rows": 1000,
     "monitoring_config": {"evaluate_constraints": true, "checks": {"extra_column_check": false},
                           "data_type_threshold": 0.0, "range_threshold": 0.01,
                           "categorical_values_threshold": 0.01, "max_examples": 5},
     "columns": {
       "age":    {"role": "feature", "inferred_type": "integral", "completeness": 1.0,
                  "min": 18, "max": 95, "is_non_negative": true, "baseline": {...}},
       "region": {"role": "feature", "inferred_type": "string", "completeness": 0.97,
                  "categories": ["apac", "eu", "us"], "checks": {"categorical_values_check": false}},
       "score":  {"role": "score", "inferred_type": "fractional", "min": 0.002, "max": 0.998, ...}}}

Every field is documented on :class:`Constraints`, :class:`MonitoringConfig` and
:class:`ColumnConstraints` (and in docs/parts/drift.md, "Constraints and violations"). Which columns:
the model's features, its score and prediction and its label; a classifier's prediction and label by
class *name* (the store holds class indices), a multiclass model's per-class probabilities not at all.

What is suggested, and why:

* ``inferred_type``: ``embedding`` for an embedding feature (with its ``dim``), ``string`` for a
  categorical feature and a classifier's prediction and label, else ``integral`` when every baseline
  value is a whole number, ``fractional`` otherwise (SageMaker's Integral / Fractional / String);
* ``completeness``: the baseline's share of rows with a value, lowered by three standard errors of
  the difference between a baseline of its size and a window of ``drift.window_size`` rows, so a
  column missing in 3 % of the baseline's rows does not fail on chance; a complete column stays at
  1.0 (one missing value in a window is a violation, as in SageMaker). None for the label: labels
  arrive late, a window's labelled share is not a quality of its data;
* ``min`` / ``max``: the baseline's own, and ``is_non_negative`` when its minimum is at least 0. A
  few of a window's values fall outside the baseline's range by chance (a new value lies beyond the
  largest of n baseline values with probability 1/(n+1)), so a range violation needs more than
  ``monitoring_config.range_threshold`` of the values (1 %) outside; see the docs for the figures;
* ``categories``: every category of the baseline, when it has at most ``max_categories`` (100) of
  them; none past that (the check is then off for the column until a person lists them); a
  classifier's prediction and label: the model's classes, seen in the baseline or not.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from monitor.config import DriftloopConfig, ModelConfig
from monitor.drift.frames import class_names
from monitor.errors import UserInputError
from monitor.files import READABLE, atomic_write_text

CONSTRAINTS_VERSION = 1
MAX_CATEGORIES = 100          # categories a suggested constraint lists at most (--max-categories)
MAX_LISTED_CATEGORIES = 10_000  # what a file may list per column (a file stays readable and bounded)
MAX_FILE_BYTES = 16 * 1024 * 1024


class ConstraintsError(UserInputError):
    """A constraints file that cannot be used: unreadable, not JSON, or a field that is wrong (the
    message names the column and the field)."""


class CheckKind(str, Enum):
    """The kinds of violation, SageMaker Model Monitor's names (``range_check`` is driftloop's:
    SageMaker checks only ``is_non_negative``)."""
    DATA_TYPE = "data_type_check"
    COMPLETENESS = "completeness_check"
    RANGE = "range_check"
    CATEGORICAL_VALUES = "categorical_values_check"
    MISSING_COLUMN = "missing_column_check"
    EXTRA_COLUMN = "extra_column_check"


class ColumnType(str, Enum):
    INTEGRAL = "integral"
    FRACTIONAL = "fractional"
    STRING = "string"
    EMBEDDING = "embedding"


NUMERIC_TYPES = frozenset({ColumnType.INTEGRAL, ColumnType.FRACTIONAL})


class Role(str, Enum):
    FEATURE = "feature"
    SCORE = "score"
    PREDICTION = "prediction"
    LABEL = "label"


class _Strict(BaseModel):
    # A misspelt key would silently check nothing: refuse it, as the configuration does.
    model_config = ConfigDict(extra="forbid", frozen=True)


class MonitoringConfig(_Strict):
    """The ``monitoring_config`` block: what is checked and how much a window may deviate."""

    evaluate_constraints: bool = Field(True, description="false: the file is read and checked for mistakes, "
                                       "nothing is evaluated (as drift.constraints: '' but keeping the file)")
    checks: dict[CheckKind, bool] = Field(default_factory=dict, description="a check kind turned off (false) for "
                                          "every column, e.g. {\"extra_column_check\": false}; absent kinds are on")
    data_type_threshold: float = Field(0.0, ge=0, le=1, description="share of a column's values of another type "
                                       "(a fraction in an integral column, a vector of another length) tolerated "
                                       "before a data_type_check violation")
    range_threshold: float = Field(0.01, ge=0, le=1, description="share of a column's values outside [min, max] "
                                   "(or negative, with is_non_negative) tolerated before a range_check violation")
    categorical_values_threshold: float = Field(0.01, ge=0, le=1, description="share of a column's values not in "
                                                "its categories tolerated before a categorical_values_check "
                                                "violation")
    max_examples: int = Field(5, ge=0, le=20, description="example values a violation lists at most")

    def on(self, kind: CheckKind) -> bool:
        return self.checks.get(kind, True)


class ColumnConstraints(_Strict):
    """One column's constraints (the key of ``columns`` is its name). A check runs when its constraint
    is set and neither the column's nor the file's ``checks`` turns it off."""

    role: Role | None = Field(None, description="what the column is to the model when the file was written "
                              "(informational: a check takes the roles from the model's configuration)")
    inferred_type: ColumnType = Field(description="integral, fractional, string or embedding: the values' type "
                                      "(data_type_check)")
    dim: int | None = Field(None, ge=1, description="embedding: the vectors' length (data_type_check)")
    monitoring: bool = Field(True, description="false: no check on this column (nor is it an extra column)")
    checks: dict[CheckKind, bool] = Field(default_factory=dict, description="a check kind turned off (false) for "
                                          "this column; absent kinds are on")
    completeness: float | None = Field(None, ge=0, le=1, description="least share of a window's rows with a "
                                       "value (completeness_check); null: not checked")
    min: float | None = Field(None, description="least value allowed (range_check); null: no lower bound")
    max: float | None = Field(None, description="largest value allowed (range_check); null: no upper bound")
    is_non_negative: bool = Field(False, description="true: a negative value is outside the range (range_check)")
    categories: list[str] | None = Field(None, max_length=MAX_LISTED_CATEGORIES, description="the values allowed "
                                         "(categorical_values_check); null: any value")
    baseline: dict[str, Any] | None = Field(None, description="what the baseline had (informational: rows, "
                                            "completeness, min, max, distinct); never checked")

    @field_validator("min", "max")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError("must be a finite number (null for no bound)")
        return v

    @field_validator("checks")
    @classmethod
    def _column_checks(cls, v: dict[CheckKind, bool]) -> dict[CheckKind, bool]:
        if CheckKind.EXTRA_COLUMN in v:
            raise ValueError("extra_column_check concerns columns the file does not list; turn it off in "
                             "monitoring_config.checks")
        return v

    @model_validator(mode="after")
    def _fits_type(self) -> "ColumnConstraints":
        numeric = self.inferred_type in NUMERIC_TYPES
        if not numeric and (self.min is not None or self.max is not None or self.is_non_negative):
            raise ValueError(f"min, max and is_non_negative are for integral or fractional columns, not "
                             f"{self.inferred_type.value}")
        if self.categories is not None and self.inferred_type is not ColumnType.STRING:
            raise ValueError(f"categories are for string columns, not {self.inferred_type.value}")
        if self.dim is not None and self.inferred_type is not ColumnType.EMBEDDING:
            raise ValueError(f"dim is for embedding columns, not {self.inferred_type.value}")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min:g}) is above max ({self.max:g})")
        return self

    def on(self, kind: CheckKind, config: MonitoringConfig) -> bool:
        return self.monitoring and config.on(kind) and self.checks.get(kind, True)


class Constraints(_Strict):
    """A constraints file: a version header, where it came from, what is checked and each column."""

    version: Literal[1] = Field(description="the file format's version (1)")
    model: str | None = Field(None, description="the model the file was suggested for (informational)")
    champion_version: str | None = Field(None, description="the champion version whose baseline it was "
                                         "suggested from (informational: a check says so beside its violations)")
    created_at: str | None = Field(None, description="when it was suggested, ISO 8601 UTC (informational)")
    baseline_rows: int | None = Field(None, ge=0, description="rows of that baseline (informational)")
    monitoring_config: MonitoringConfig = Field(default_factory=MonitoringConfig)
    columns: dict[str, ColumnConstraints] = Field(description="column name → its constraints; a column left "
                                                  "out is not checked, and is an extra column when a window has "
                                                  "it (extra_column_check)")


# -- the columns and how their values are read ------------------------------------------------------
def monitored_columns(model_cfg: ModelConfig) -> dict[str, Role]:
    """The columns a constraints file describes, by name: features, score, prediction, label."""
    out = {name: Role.FEATURE for name in model_cfg.feature_names}
    for name, role in ((model_cfg.score, Role.SCORE), (model_cfg.prediction, Role.PREDICTION),
                       (model_cfg.target, Role.LABEL)):
        out.setdefault(name, role)
    return out


def column_values(frame: pd.DataFrame, name: str, role: Role, model_cfg: ModelConfig) -> pd.Series:
    """The column as constraints see it: a classifier's prediction and label by class name (the store
    keeps class indices; a value that is no class index stays as it is), every other column as it is."""
    values = frame[name]
    if role not in (Role.PREDICTION, Role.LABEL) or not model_cfg.kind.classifier:
        return values
    codes = numbers(values)
    names = np.asarray(class_names(model_cfg), dtype=object)
    with np.errstate(invalid="ignore"):
        known = np.isfinite(codes) & (codes == np.floor(codes)) & (codes >= 0) & (codes < len(names))
    out = np.full(len(values), None, dtype=object)
    out[known] = names[codes[known].astype(np.int64)]
    other = present(values) & ~known  # rare: a value that is no class index, kept as it came
    if other.any():
        out[other] = values.to_numpy(dtype=object)[other]
    return pd.Series(out, index=values.index, name=name)


def present(values: pd.Series) -> np.ndarray:
    """Rows with a value (None, NaN and NA are missing; an infinity is a value)."""
    return values.notna().to_numpy()


def numbers(values: pd.Series) -> np.ndarray:
    """Float64 values (NaN where the value is missing or not a number)."""
    if pd.api.types.is_numeric_dtype(values.dtype) and not pd.api.types.is_bool_dtype(values.dtype):
        return values.to_numpy(dtype=np.float64, na_value=np.nan)
    return pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


# -- suggesting ----------------------------------------------------------------------------------
def _suggested_completeness(share: float, rows: int, window_rows: int) -> float:
    """The baseline's completeness less three standard errors of a window's difference from it."""
    if share >= 1.0 or rows == 0:
        return 1.0 if rows else 0.0
    margin = 3.0 * math.sqrt(share * (1.0 - share) * (1.0 / rows + 1.0 / max(window_rows, 1)))
    return max(0.0, math.floor((share - margin) * 10_000) / 10_000)


def _number(x: float, integral: bool) -> float | int:
    return int(x) if integral else float(x)


def declared_type(name: str, role: Role, model_cfg: ModelConfig) -> ColumnType | None:
    """The type the model says a column has: ``embedding``, or ``string`` for a categorical feature
    and a classifier's prediction and label; None for a number (integral or fractional by its values)."""
    if role in (Role.PREDICTION, Role.LABEL):
        return ColumnType.STRING if model_cfg.kind.classifier else None
    if role is Role.FEATURE:
        kind = next((f.type for f in model_cfg.features if f.name == name), "numeric")
        return {"embedding": ColumnType.EMBEDDING, "categorical": ColumnType.STRING}.get(kind)
    return None


def suggest_column(values: pd.Series | None, role: Role, declared: ColumnType | None, dim: int | None, *,
                   window_rows: int, max_categories: int, classes: list[str] | None = None) -> dict[str, Any]:
    """One column's suggested constraints from its baseline values (module docstring); ``classes``: a
    classifier's prediction and label, whose categories are the model's classes, seen or not. A column
    the baseline lacks (``values`` None) gets its type and categories only."""
    if values is None:
        values = pd.Series([], dtype=object if declared is ColumnType.STRING else float)
    rows = len(values)
    has = present(values)
    k = int(has.sum())
    share = k / rows if rows else 0.0
    out: dict[str, Any] = {"role": role.value}
    baseline: dict[str, Any] = {"rows": rows, "completeness": round(share, 6)}
    completeness = None if role is Role.LABEL or not rows else _suggested_completeness(share, rows, window_rows)
    if declared is ColumnType.EMBEDDING:
        out.update(inferred_type=declared.value, dim=dim, completeness=completeness)
    elif declared is ColumnType.STRING:
        out.update(inferred_type=declared.value, completeness=completeness)
        counts = values[has].astype(str).value_counts()
        baseline["distinct"] = int(len(counts))
        if classes is not None:
            out["categories"] = list(classes)
        elif len(counts) <= max_categories:
            out["categories"] = sorted(counts.index.tolist())
    else:
        x = numbers(values)
        x = x[np.isfinite(x)]
        integral = bool(len(x)) and bool((x == np.floor(x)).all())
        out.update(inferred_type=(ColumnType.INTEGRAL if integral else ColumnType.FRACTIONAL).value,
                   completeness=completeness)
        if len(x):
            low, high = _number(x.min(), integral), _number(x.max(), integral)
            out.update(min=low, max=high, is_non_negative=bool(low >= 0))
            baseline.update(min=low, max=high)
    out["monitoring"] = True
    out["checks"] = {}
    out["baseline"] = baseline
    return out


def suggest_constraints(reference: pd.DataFrame, model_cfg: ModelConfig, *, champion_version: str | None,
                        window_rows: int, max_categories: int = MAX_CATEGORIES,
                        clock: Callable[[], float] = time.time) -> dict[str, Any]:
    """The constraints file (as JSON data) suggested from ``reference``, the champion's baseline
    sample: one entry per column of :func:`monitored_columns` (one the baseline lacks, such as a binary
    model's prediction in an older baseline, with its type and a classifier's classes only)."""
    columns: dict[str, Any] = {}
    for name, role in monitored_columns(model_cfg).items():
        declared = declared_type(name, role, model_cfg)
        dim = model_cfg.embedding_dim(name) if declared is ColumnType.EMBEDDING else None
        classes = (class_names(model_cfg) if declared is ColumnType.STRING
                   and role in (Role.PREDICTION, Role.LABEL) else None)
        values = column_values(reference, name, role, model_cfg) if name in reference.columns else None
        columns[name] = suggest_column(values, role, declared, dim, window_rows=window_rows,
                                       max_categories=max_categories, classes=classes)
    created = datetime.fromtimestamp(float(clock()), tz=timezone.utc).isoformat(timespec="seconds")
    body = {"version": CONSTRAINTS_VERSION, "model": model_cfg.name, "champion_version": champion_version,
            "created_at": created.replace("+00:00", "Z"), "baseline_rows": int(len(reference)),
            "monitoring_config": MonitoringConfig().model_dump(mode="json"), "columns": columns}
    Constraints.model_validate(body)  # what is written can be read back
    return body


def write_constraints(body: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write ``body`` as indented JSON, atomically (people edit it)."""
    path = Path(path)
    atomic_write_text(path, json.dumps(body, indent=2) + "\n", mode=READABLE)
    return path


# -- reading -------------------------------------------------------------------------------------
def _where(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc) or "(the file)"


def _problems(exc: ValidationError) -> str:
    """Pydantic's errors as ``columns.age.min: message`` (the column and the field), at most five."""
    errors = exc.errors(include_url=False)
    shown = [f"{_where(e['loc'])}: {e['msg']}" + (f" (got {e['input']!r})" if e["type"] not in ("missing",)
                                                  and not isinstance(e["input"], (dict, list)) else "")
             for e in errors[:5]]
    more = f"; and {len(errors) - 5} more" if len(errors) > 5 else ""
    return "; ".join(shown) + more


def parse_constraints(text: str, source: str) -> Constraints:
    """A constraints file's text, validated; ConstraintsError naming the column and field."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConstraintsError(f"constraints file {source} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConstraintsError(f"constraints file {source}: expected a JSON object, got {type(data).__name__}")
    try:
        return Constraints.model_validate(data)
    except ValidationError as exc:
        raise ConstraintsError(f"constraints file {source}: {_problems(exc)}") from None


def load_constraints(path: str | os.PathLike[str]) -> Constraints:
    path = Path(path)
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ConstraintsError(f"constraints file {path} is larger than {MAX_FILE_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConstraintsError(f"cannot read the constraints file {path}: {exc}") from None
    return parse_constraints(text, str(path))


@dataclass(frozen=True)
class ConstraintsFile:
    """The constraints a check uses: the file's path and either its constraints or why it cannot be
    used (``problem``: the check reports it and goes on)."""

    path: str
    constraints: Constraints | None
    problem: str | None = None


def constraints_for(cfg: DriftloopConfig) -> ConstraintsFile | None:
    """The constraints of ``cfg``'s model: None when ``drift.constraints`` is off, or when it is unset and
    the default file does not exist; a problem (never an exception) when the file cannot be used."""
    path = cfg.constraints_path
    if path is None or (cfg.drift.constraints is None and not path.exists()):
        return None
    path = path.absolute()  # as reports name it; a path is hidden from callers without the token
    try:
        return ConstraintsFile(str(path), load_constraints(path))
    except ConstraintsError as exc:
        return ConstraintsFile(str(path), None, str(exc))
