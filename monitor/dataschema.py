"""Inferring a model's feature schema from a user's data file, and comparing two schemas.

One rule set, used by ``driftloop init`` (which writes it to ``driftloop.yaml``, explained in
comments) and by ``driftloop train`` when no features are configured, so both agree:

* booleans are **numeric** (0/1);
* integers and floats are **numeric**: an integer column keeps its order (tenure, number of
  products). One with few distinct values (at most ``FEW_VALUES``) gets a comment, because
  integer *codes* (a plan id, a region number) should be made categorical by hand;
* a column of equal-length numeric vectors (a Parquet list or fixed-size list column: an image or
  text model's embedding) is an **embedding** with ``dim`` = that length;
* a column named ``input_uri``, or text that is a path or URI on every row (``s3://...``,
  ``/data/img/1.png``, ``img/1.png``), is the raw input's reference, not a feature: left out, said so;
* text (and pandas categories) is **categorical**, unless almost every row has its own value:
  a string column unique on more than ``ID_LIKE_SHARE`` of the sampled rows is an id or free
  text, not a category, and is refused with a hint to pass ``--id`` or ``--ignore``;
* a column without a single value, or with the same value on every row, is *left out* and said
  so (a :class:`LeftOut`, written to ``driftloop.yaml`` under ``ignore`` with the reason): it
  carries no signal to learn, and drift on it would mean nothing (any new value "drifts" it);
* a column that looks like a model's *output* is left out too, with a warning, unless it is kept
  (``keep``, ``driftloop init --keep``): one named like a prediction, score, probability, logit or
  confidence (:func:`output_name`), or one of a group of numbers in [0, 1] that sum to 1 on every
  row, i.e. the probabilities of the classes (:func:`probability_groups`). A model's outputs beside
  its inputs in the user's file (``y_pred``, ``proba_<class>``) are not inputs: learning from them
  is leakage, and a live service does not send them as features.

* a column named like one the records reserve (``id``, ``ts``, ``label_ts``, ``score``,
  ``prediction``: :data:`RESERVED_COLUMNS`) cannot be a feature: refused, naming the column, what
  the name is reserved for and the ways out (``--ignore``, ``--id``, renaming it).

The record id: :func:`propose_id` finds the column ``driftloop init`` takes as the id when none is
given (a passenger or customer number): present and unique on every row, and either integers
(not floats, not booleans) named like an id (``PassengerId``, ``customer_number``, ``account_no``)
or counting up one by one (a row number), or text named like an id (``customerID``). Such a
column is no feature: every later row brings a value training never saw.

The target, the id column and ignored columns are never features. :func:`resolve_task` says which
task (``monitor.tasks``) the target asks for, or checks the one asked for against it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any, Sequence

import numpy as np
import pandas as pd

from monitor.config import FeatureSpec, ModelConfig
from monitor.embeddings import INPUT_URI, MAX_EMBEDDING_DIM
from monitor.errors import DataError
from monitor.tasks import MAX_CLASSES, PROBA_SUM_TOLERANCE, InferredTask, sorted_classes, infer_task

SAMPLE_ROWS = 100_000      # rows looked at; enough to see every common category
# Names a record (or a window's frame) uses for itself, and why: a feature may not take them.
RESERVED_COLUMNS = {"id": "on the wire a record's id is always the key id", "ts": "the prediction's time",
                    "label_ts": "the label's time", "score": "the model's score column (model.score)",
                    "prediction": "the model's predicted label (model.prediction)"}
FEW_VALUES = 10            # integer columns with at most this many values get a "codes?" comment
ID_LIKE_SHARE = 0.5        # text columns with more distinct values than this share of rows are refused
MIN_ROWS_FOR_ID_RULE = 20  # below this, every small table would look like ids


@dataclass(frozen=True)
class InferredFeature:
    name: str
    type: str        # "numeric" | "categorical" | "embedding"
    note: str        # why, for a comment in driftloop.yaml
    dim: int | None = None  # embedding: the vectors' length

    def spec(self) -> FeatureSpec:
        return FeatureSpec(name=self.name, type=self.type, dim=self.dim)  # type: ignore[arg-type]


class Omission(str, Enum):
    """Why a column of the data is left out of the features."""
    EMPTY = "empty"                # no values
    CONSTANT = "constant"          # one value on every row
    MODEL_OUTPUT = "model_output"  # a model's prediction, score or probability (keep it with --keep)
    INPUT_REFERENCE = "input_reference"  # input_uri, or paths/URIs of the raw inputs (send as input_uri)


@dataclass(frozen=True)
class LeftOut:
    """A column that is not a feature (no signal, or a model's output); ``why`` for the user."""
    name: str
    why: str
    kind: Omission = Omission.CONSTANT


@dataclass(frozen=True)
class InferredSchema:
    features: list[InferredFeature]
    left_out: list[LeftOut]
    kept_outputs: tuple[str, ...] = ()  # features that look like a model's outputs, kept as asked


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


_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+|\.{0,2}/\S+|[A-Za-z]:\\\S+|(\S+/)+\S+\.[A-Za-z0-9]{1,5}")


def _vector_length(present: pd.Series) -> int | str | None:
    """The common length of a column of numeric vectors (lists or arrays: a Parquet list column),
    a problem naming how they differ, or None when the values are not vectors."""
    if present.dtype != object or not present.map(lambda v: isinstance(v, (list, tuple, np.ndarray))).all():
        return None
    lengths = present.map(len)
    if lengths.nunique() != 1:
        return f"vectors of {lengths.nunique()} different lengths ({lengths.min()}-{lengths.max()})"
    try:
        sample = np.asarray(present.iloc[:1000].tolist(), dtype=np.float64)
    except (TypeError, ValueError):
        return "lists of values that are not all numbers"
    if not np.isfinite(sample).all():
        return "vectors with NaN or infinite values"
    return int(lengths.iloc[0])


def _input_reference(name: str, present: pd.Series) -> LeftOut | None:
    if name == INPUT_URI:
        return LeftOut(name, "the raw input's reference (input_uri): stored with each prediction for your "
                             "training code, not a feature", Omission.INPUT_REFERENCE)
    text = present.iloc[:1000]
    if text.dtype == object and text.map(lambda v: isinstance(v, str) and _URI.fullmatch(v) is not None).all():
        return LeftOut(name, f"paths or URIs of raw inputs (e.g. {text.iloc[0]!r}), not a feature; a service "
                             f"sends them as input_uri", Omission.INPUT_REFERENCE)
    return None


def infer_column(name: str, series: pd.Series) -> InferredFeature | LeftOut | str:
    """The inferred feature, a column left out (no signal), or a one-line problem naming the column."""
    present = series.dropna()
    if len(present) == 0:
        return LeftOut(name, "no values (all missing)", Omission.EMPTY)
    reference = _input_reference(name, present)
    if reference is not None:
        return reference
    dim = _vector_length(present)
    if isinstance(dim, str):
        return f"column {name!r} holds lists, {dim}: an embedding is one fixed-length numeric vector per row"
    if dim is not None:
        if not 2 <= dim <= MAX_EMBEDDING_DIM:
            return f"column {name!r} holds vectors of {dim} values; an embedding has 2-{MAX_EMBEDDING_DIM}"
        gaps = f", {1 - len(present) / len(series):.0%} missing" if len(present) < len(series) else ""
        return InferredFeature(name, "embedding", f"vectors of {dim} numbers{gaps}", dim)
    if len(present) == len(series) and present.nunique() == 1:
        value = present.iloc[0]
        shown = repr(value) if isinstance(value, str) else str(value)
        return LeftOut(name, f"constant: {shown} on every row", Omission.CONSTANT)
    missing = f", {1 - len(present) / len(series):.0%} missing" if len(present) < len(series) else ""
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype) or (pd.api.types.is_object_dtype(dtype)
                                             and present.map(type).isin([bool]).all()):
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
    present = target.dropna()
    name, k = target.name, present.nunique()
    if task == "regression":
        if not pd.api.types.is_numeric_dtype(present.dtype) or pd.api.types.is_bool_dtype(present.dtype):
            shown = ", ".join(map(repr, sorted(map(str, present.unique()))[:3]))
            raise DataError(f"target {name!r} holds values that are not numbers ({shown}, ...): a regression "
                            "target is a number; choose multiclass or binary (model.task, init --task)")
        return InferredTask("regression", None, f"chosen with --task ({k} distinct values)")
    if task == "binary" and k != 2:
        raise DataError(f"target {name!r} has {k} distinct values; a binary target has two: choose multiclass"
                        + (" or regression" if pd.api.types.is_numeric_dtype(present.dtype) else "")
                        + " (model.task, init --task)")
    if task == "multiclass" and not 2 <= k <= MAX_CLASSES:
        raise DataError(f"target {name!r} has {k} distinct values; a multiclass target has 2 to {MAX_CLASSES}"
                        + (": choose regression (model.task, init --task)" if k > MAX_CLASSES else ""))
    classes = sorted_classes(present.unique())
    if task == "binary":
        return InferredTask("binary", None if set(classes) == {"0", "1"} else classes,
                            f"chosen with --task; {classes[1]!r} is the positive class (label 1)")
    return InferredTask("multiclass", classes, f"chosen with --task ({k} classes)")


def infer_features(data: pd.DataFrame, target: str, *, id: str | None = "id",
                   ignore: list[str] | tuple[str, ...] = ()) -> list[InferredFeature]:
    """The features of ``data`` (every column but target, id, ignored and left-out ones), by the
    rules above. DataError listing every problem at once when a column cannot be used."""
    return infer_schema(data, target, id=id, ignore=ignore).features


def infer_schema(data: pd.DataFrame, target: str, *, id: str | None = "id",
                 ignore: list[str] | tuple[str, ...] = (), keep: list[str] | tuple[str, ...] = (),
                 classes: Sequence[str] | None = None) -> InferredSchema:
    """The features of ``data`` and the columns left out: for carrying no signal (constant, all
    missing) or for looking like a model's outputs (:func:`model_outputs`; ``classes`` name its
    ``p_<class>`` columns) unless in ``keep``. DataError listing every problem at once when a
    column cannot be used."""
    columns = [str(c) for c in data.columns]
    absent = [c for c in [target, *ignore, *keep] if c not in columns]
    if id not in (None, "id") and id not in columns:
        absent.append(id)
    if absent:
        raise DataError(f"the data has no column(s) {', '.join(absent)} (has: {', '.join(columns[:20])})")
    sample = data if len(data) <= SAMPLE_ROWS else data.sample(SAMPLE_ROWS, random_state=0)
    skip = {target, id, *ignore}
    flagged = model_outputs(sample, [c for c in columns if c not in skip], classes)
    outputs = [c for c in flagged if c.name not in keep]
    kept = {c.name for c in flagged if c.name in keep}  # a feature as asked; its note says what it looks like
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
                            f"feature: pass --ignore {name}{record_id} or rename the column in your data "
                            f"(e.g. {name}_value) to keep it as a feature")
            continue
        if isinstance(result, str):
            problems.append(result)
            continue
        try:
            result.spec()
        except ValueError:
            problems.append(f"column {name!r} is not usable as a feature name (letters, digits and _, not "
                            f"starting with a digit); rename it or pass --ignore {name}")
            continue
        if name in kept:
            result = InferredFeature(name, result.type, f"{result.note}; looks like a model output, kept by --keep")
        found.append(result)
    if not found and not problems:
        dropped = f" ({', '.join(f'{c.name}: {c.why}' for c in left_out)})" if left_out else ""
        problems.append(f"no feature columns left besides the target {target!r}{dropped}")
    if problems:
        raise DataError("; ".join(problems))
    left_out.sort(key=lambda c: columns.index(c.name))  # file order, as the features
    return InferredSchema(found, left_out, tuple(f.name for f in found if f.name in kept))


def _snake(name: str) -> str:
    """``PassengerId`` -> ``passenger_id``, ``customerID`` -> ``customer_id``, ``Row Number`` -> ``row_number``."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name.strip())
    return re.sub(r"[^a-z0-9]+", "_", spaced.lower()).strip("_")


_ID_NAME = re.compile(r"id|ids|uuid|guid|(.+_)(id|no|nr|num|number|key|uuid|guid)|(.+_)?number")


def id_like_name(name: str) -> bool:
    """Whether ``name`` reads as a record id's: ``id``, ``PassengerId``, ``customerID``,
    ``customer_number``, ``account_no``, ``RowNumber`` (not ``idle_minutes``, ``width``, ``number_of_kids``)."""
    return _ID_NAME.fullmatch(_snake(name)) is not None


@dataclass(frozen=True)
class ProposedId:
    name: str
    why: str  # for the user: what made init take it


def propose_id(data: pd.DataFrame, skip: Sequence[str] = ()) -> ProposedId | None:
    """The column of ``data`` (not in ``skip``) that is the record id by the rules in the module
    docstring, or None. Columns named like an id come first, then file order."""
    if len(data) < MIN_ROWS_FOR_ID_RULE:
        return None
    columns = [str(c) for c in data.columns if str(c) not in skip]
    for name in sorted(columns, key=lambda c: not id_like_name(c)):
        series = data[name]
        dtype = series.dtype
        if series.isna().any() or pd.api.types.is_bool_dtype(dtype) or not series.is_unique:
            continue
        named = id_like_name(name)
        if pd.api.types.is_integer_dtype(dtype):
            counting = bool((series.diff().iloc[1:] == 1).all())
            if named or counting:
                what = "named like an id" if named else "counting up by one (a row number)"
                return ProposedId(name, f"integers, unique on every row, {what}")
        elif named and not pd.api.types.is_numeric_dtype(dtype) and \
                bool(series.map(lambda v: isinstance(v, str)).all()):
            return ProposedId(name, "text, unique on every row, named like an id")
    return None


def with_features(model: ModelConfig, features: list[FeatureSpec]) -> ModelConfig:
    """``model`` with ``features`` set, validated as if they had been configured."""
    data = model.model_dump(exclude={"features"})
    return ModelConfig.model_validate({**data, "features": [f.model_dump() for f in features]})


def schema_of(model: ModelConfig) -> dict[str, Any]:
    """``{feature: type}``, the form a model version records (tag ``driftloop.schema``); an
    embedding's entry is ``{"type": "embedding", "dim": N}`` (a vector's length is part of its type)."""
    return {f.name: f.type if f.dim is None else {"type": f.type, "dim": f.dim} for f in model.features}


def feature_spec(name: str, recorded: Any) -> FeatureSpec:
    """A feature from its recorded entry (:func:`schema_of`): a type, or ``{"type", "dim"}``."""
    return FeatureSpec.model_validate({"name": name,
                                       **(recorded if isinstance(recorded, dict) else {"type": recorded})})


def _type_text(entry: Any) -> str:
    return f"{entry['type']}[{entry.get('dim')}]" if isinstance(entry, dict) else str(entry)


def schema_mismatch(configured: dict[str, Any], recorded: dict[str, Any]) -> str | None:
    """One line saying how the configured features differ from a model's recorded ones, or None."""
    parts = []
    extra = [n for n in configured if n not in recorded]
    lacking = [n for n in recorded if n not in configured]
    changed = [f"{n} ({_type_text(recorded[n])} -> {_type_text(configured[n])})" for n in configured if n in recorded
               and configured[n] != recorded[n]]
    if extra:
        parts.append(f"configured but not in the model: {', '.join(extra)}")
    if lacking:
        parts.append(f"in the model but not configured: {', '.join(lacking)}")
    if changed:
        parts.append(f"type changed: {', '.join(changed)}")
    return "; ".join(parts) or None
