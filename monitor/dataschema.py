"""Inferring a model's feature schema from a user's data file, and comparing two schemas.

One rule set, used by ``driftloop init`` (which writes it to ``driftloop.yaml``, explained in
comments) and by ``driftloop train`` when no features are configured, so both agree:

* booleans are **numeric** (0/1);
* integers and floats are **numeric**: an integer column keeps its order (tenure, number of
  products). One with few distinct values (at most ``FEW_VALUES``) gets a comment, because
  integer *codes* (a plan id, a region number) should be made categorical by hand;
* text (and pandas categories) is **categorical**, unless almost every row has its own value:
  a string column unique on more than ``ID_LIKE_SHARE`` of the sampled rows is an id or free
  text, not a category, and is refused with a hint to pass ``--id`` or ``--ignore``;
* a column without a single value, or with the same value on every row, is *left out* and said
  so (a :class:`LeftOut`, written to ``driftloop.yaml`` under ``ignore`` with the reason): it
  carries no signal to learn, and drift on it would mean nothing (any new value "drifts" it).

The target, the id column and ignored columns are never features.
"""
from __future__ import annotations

import re

from dataclasses import dataclass

import pandas as pd

from monitor.config import FeatureSpec, ModelConfig
from monitor.errors import DataError

SAMPLE_ROWS = 100_000      # rows looked at; enough to see every common category
FEW_VALUES = 10            # integer columns with at most this many values get a "codes?" comment
ID_LIKE_SHARE = 0.5        # text columns with more distinct values than this share of rows are refused
MIN_ROWS_FOR_ID_RULE = 20  # below this, every small table would look like ids


@dataclass(frozen=True)
class InferredFeature:
    name: str
    type: str        # "numeric" | "categorical"
    note: str        # why, for a comment in driftloop.yaml

    def spec(self) -> FeatureSpec:
        return FeatureSpec(name=self.name, type=self.type)  # type: ignore[arg-type]


@dataclass(frozen=True)
class LeftOut:
    """A column that is not a feature because it carries no signal; ``why`` for the user."""
    name: str
    why: str


@dataclass(frozen=True)
class InferredSchema:
    features: list[InferredFeature]
    left_out: list[LeftOut]


def _values_note(series: pd.Series, limit: int = 5) -> str:
    values = sorted(map(str, series.dropna().unique()))
    shown = ", ".join(values[:limit]) + (", ..." if len(values) > limit else "")
    return f"{len(values)} value(s): {shown}"


_DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}([ T]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?"
                   r"|\d{1,2}[/.]\d{1,2}[/.]\d{2,4}( \d{1,2}:\d{2}(:\d{2})?)?")


def _all_dates(present: pd.Series) -> bool:
    """Text that is a date or timestamp on every row (ISO 8601, or day/month/year with / or .)."""
    if present.dtype != object and not isinstance(present.dtype, pd.StringDtype):
        return False
    return bool(present.map(lambda v: isinstance(v, str) and _DATE.fullmatch(v.strip()) is not None).all())


def infer_column(name: str, series: pd.Series) -> InferredFeature | LeftOut | str:
    """The inferred feature, a column left out (no signal), or a one-line problem naming the column."""
    present = series.dropna()
    if len(present) == 0:
        return LeftOut(name, "no values (all missing)")
    if len(present) == len(series) and present.nunique() == 1:
        value = present.iloc[0]
        shown = repr(value) if isinstance(value, str) else str(value)
        return LeftOut(name, f"constant: {shown} on every row")
    missing = f", {1 - len(present) / len(series):.0%} missing" if len(present) < len(series) else ""
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype) or (pd.api.types.is_object_dtype(dtype) and present.map(type).isin([bool]).all()):
        return InferredFeature(name, "numeric", f"boolean, used as 0/1{missing}")
    if pd.api.types.is_numeric_dtype(dtype):
        integer = pd.api.types.is_integer_dtype(dtype) or bool((present == present.round()).all())
        distinct = int(present.nunique())
        if integer and distinct <= FEW_VALUES:
            note = (f"integer, {_values_note(present)}{missing}; numeric keeps their order: "
                    "make it categorical if these are codes")
        else:
            note = f"{'integer' if integer else 'number'}, {distinct} distinct value(s){missing}"
        return InferredFeature(name, "numeric", note)
    if pd.api.types.is_datetime64_any_dtype(dtype) or _all_dates(present):
        return (f"column {name!r} holds dates or times: not a feature as it is (later rows bring values "
                f"never seen in training, so it would drift for ever); pass --ignore {name}, or derive "
                "features from it in your data (day of week, age in days)")
    text = present.astype(str)
    distinct = int(text.nunique())
    if len(text) >= MIN_ROWS_FOR_ID_RULE and distinct > ID_LIKE_SHARE * len(text):
        kind = "a different value on every sampled row" if distinct == len(text) else \
            f"{distinct} distinct values in {len(text)} rows"
        return (f"column {name!r} is text with {kind}: an id or free text, not a category; "
                f"pass --id {name} if it is the record id, or --ignore {name}")
    return InferredFeature(name, "categorical", f"text, {_values_note(text)}{missing}")


def infer_features(data: pd.DataFrame, target: str, *, id: str | None = "id",
                   ignore: list[str] | tuple[str, ...] = ()) -> list[InferredFeature]:
    """The features of ``data`` (every column but target, id, ignored and left-out ones), by the
    rules above. DataError listing every problem at once when a column cannot be used."""
    return infer_schema(data, target, id=id, ignore=ignore).features


def infer_schema(data: pd.DataFrame, target: str, *, id: str | None = "id",
                 ignore: list[str] | tuple[str, ...] = ()) -> InferredSchema:
    """The features of ``data`` and the columns left out for carrying no signal (constant, all
    missing); DataError listing every problem at once when a column cannot be used."""
    columns = [str(c) for c in data.columns]
    absent = [c for c in [target, *ignore] if c not in columns]
    if id not in (None, "id") and id not in columns:
        absent.append(id)
    if absent:
        raise DataError(f"the data has no column(s) {', '.join(absent)} (has: {', '.join(columns[:20])})")
    sample = data if len(data) <= SAMPLE_ROWS else data.sample(SAMPLE_ROWS, random_state=0)
    skip = {target, id, *ignore}
    found, left_out, problems = [], [], []
    for name in columns:
        if name in skip:
            continue
        # Constant on the sample is not constant on the file: judge that on every row.
        result = infer_column(name, sample[name])
        if isinstance(result, LeftOut) and len(sample) < len(data):
            result = infer_column(name, data[name])
        if isinstance(result, str):
            problems.append(result)
            continue
        if isinstance(result, LeftOut):
            left_out.append(result)
            continue
        try:
            result.spec()
        except ValueError:
            problems.append(f"column {name!r} is not usable as a feature name (letters, digits and _, not "
                            f"starting with a digit); rename it or pass --ignore {name}")
            continue
        found.append(result)
    if not found and not problems:
        dropped = f" ({', '.join(f'{c.name}: {c.why}' for c in left_out)})" if left_out else ""
        problems.append(f"no feature columns left besides the target {target!r}{dropped}")
    if problems:
        raise DataError("; ".join(problems))
    return InferredSchema(found, left_out)


def with_features(model: ModelConfig, features: list[FeatureSpec]) -> ModelConfig:
    """``model`` with ``features`` set, validated as if they had been configured."""
    data = model.model_dump(exclude={"features"})
    return ModelConfig.model_validate({**data, "features": [f.model_dump() for f in features]})


def schema_of(model: ModelConfig) -> dict[str, str]:
    """``{feature: type}``, the form a model version records (tag ``driftloop.schema``)."""
    return {f.name: f.type for f in model.features}


def schema_mismatch(configured: dict[str, str], recorded: dict[str, str]) -> str | None:
    """One line saying how the configured features differ from a model's recorded ones, or None."""
    parts = []
    extra = [n for n in configured if n not in recorded]
    lacking = [n for n in recorded if n not in configured]
    changed = [f"{n} ({recorded[n]} -> {configured[n]})" for n in configured if n in recorded
               and configured[n] != recorded[n]]
    if extra:
        parts.append(f"configured but not in the model: {', '.join(extra)}")
    if lacking:
        parts.append(f"in the model but not configured: {', '.join(lacking)}")
    if changed:
        parts.append(f"type changed: {', '.join(changed)}")
    return "; ".join(parts) or None
