"""The record-by-record pass of :mod:`monitor.records.validation`: run when the column-wise fast
path (:mod:`monitor.records.fastpath`) declines a batch, it names every problem as ``{"index",
"field", "message"}`` with :mod:`monitor.records.fields`, or builds the same normalised batch the
fast path would. Also the rules of each task's outputs and labels (:mod:`monitor.tasks`): classes
by name, probabilities per class, a number for regression.
"""
from __future__ import annotations

import math
from dataclasses import fields
from functools import partial
from typing import Any, Callable

from monitor.config import ModelConfig
from monitor.records import fields as F
from monitor.records.batches import ErrorList, LabelBatch, PredictionBatch
from monitor.records.inputs import InputRoots
from monitor.tasks import PROBA_SUM_TOLERANCE, class_name, task_of

LABEL_FIELDS = frozenset({"id", "ts", "label"})
LABEL_REQUIRED = frozenset({"id", "label"})
_BAD = object()


class RecordByRecord:
    """Validates ``model``'s records one by one; lists at most ``max_errors`` problems."""

    def __init__(self, model: ModelConfig, max_errors: int):
        self.model = model
        self._max_errors = max_errors
        # The model's column names accepted for generic fields ({"churned": "label"}); a record that
        # holds both is told so, not that the model's name is unknown.
        self.aliases: dict[str, str] = {}
        self._names = model.feature_names
        self._featset = frozenset(self._names)
        # Longer categorical values are refused: each one is stored, drawn in every report and
        # carried in check results while it sits in the window (model.max_value_chars).
        self._max_value_chars = model.max_value_chars
        # Larger numbers are refused: stored, they would sit in every check's window (model.max_abs_value).
        self.number = partial(F.check_number, limit=model.max_abs_value)
        # The task's record rules: which outputs a record carries and how they and labels are read.
        self._task = task_of(model)
        self.pred_fields, self.pred_required = self._task.prediction_fields()
        # Classes by name; a binary model without classes takes 0 and 1 only (as before).
        self.classes = list(model.classes) if model.classes else None
        self.class_index = {c: i for i, c in enumerate(self.classes)} if self.classes else None
        self._inputs = InputRoots.of(model)  # where an input_uri may point (monitor/records/inputs.py)
        # A ts this far past the server's clock is refused (model.max_future_seconds): it would be the
        # newest row of every window for as long.
        self.future_us = None if model.max_future_seconds is None else round(model.max_future_seconds * 1_000_000)

    def _ts(self, errors: ErrorList, i: int, value: object, now: int) -> Any:
        ts = _check(errors, i, "ts", F.check_ts, value)
        if ts is not _BAD and self.future_us is not None and ts > now + self.future_us:
            errors.add(i, "ts", f"expected a time at most {self.model.max_future_seconds:g} s after this server's "
                                f"clock ({F.iso_us(now)}), got {F.describe(value)}: a typo in the year, or a clock "
                                "set ahead? (model.max_future_seconds)")
            return _BAD
        return ts

    def predictions(self, records: list, now: int, errors: ErrorList | None = None, offset: int = 0) -> PredictionBatch:
        """Record-by-record validation: every problem reported, or the same batch as the fast path.
        Given ``errors``, ``records`` is a chunk of a larger batch starting at index ``offset``:
        its problems are added there, under their index in the batch, for the caller to raise."""
        own = errors is None
        errors = ErrorList(self._max_errors) if errors is None else errors
        out: dict[str, Any] = {f.name: [] for f in fields(PredictionBatch)
                               if f.name not in ("duplicates", "positions", "probas")}
        probas: list[list[float]] = []
        for i, rec in enumerate(records, offset):
            if not self._structure(errors, i, rec, self.pred_fields, self.pred_required):
                continue
            rid = _check(errors, i, "id", F.check_id, rec["id"]) if "id" in rec else _BAD
            feats = self._features(errors, i, rec["features"]) if "features" in rec else _BAD
            score, pred, given, row_probas = self._task.read_outputs(_RecordOutputs(self, errors, i, rec))
            ts = rec.get("ts")
            if ts is not None:
                ts = self._ts(errors, i, ts, now)
            version = rec.get("model_version")
            if version is not None:
                version = _check(errors, i, "model_version", F.check_model_version, version)
            uri = rec.get("input_uri")
            if uri is not None:
                uri = _check(errors, i, "input_uri", self._input_uri, uri)
            if errors.count:
                continue  # stop building once the batch is lost; keep collecting errors
            out["ids"].append(rid)
            out["ts"].append(now if ts is None else ts)
            out["ts_given"].append(ts is not None)
            out["features"].append(feats)
            out["scores"].append(score)
            out["predictions"].append(int(score > self.model.threshold) if pred is None else pred)
            out["prediction_given"].append(given)
            out["model_versions"].append(version)
            out["input_uris"].append(uri)
            if row_probas is not None:
                probas.append(row_probas)
        if own:
            errors.check("prediction", len(records))
        rows = out.pop("features")
        columns = [list(c) for c in zip(*rows)] if rows else [[] for _ in self._names]
        proba_columns = [list(c) for c in zip(*probas)] if probas else self._task.batch_probas(self.model.n_classes)
        return PredictionBatch(features=columns, **out, probas=proba_columns)

    def _input_uri(self, value: Any) -> str:
        return self._inputs.check(F.check_input_uri(value))

    # ---- per-task outputs ---------------------------------------------------------------------
    def _known_classes(self) -> str:
        assert self.classes is not None
        shown = ", ".join(map(repr, self.classes[:12])) + (", ..." if len(self.classes) > 12 else "")
        return f"model {self.model.name!r} has classes {shown}"

    def class_of(self, value: Any) -> int:
        """A class name (or a number equal to one) -> its index; FieldError naming the classes."""
        if self.class_index is None:
            raise F.FieldError("the model's classes are not known yet (train the model, or set model.classes)")
        if type(value) not in (str, int, float) or type(value) is bool:
            raise F.FieldError(f"expected a class name, got {F.describe(value)} ({self._known_classes()})")
        index = self.class_index.get(class_name(value))
        if index is None:
            raise F.FieldError(f"unknown class {F.describe(value)} ({self._known_classes()})")
        return index

    def binary_class(self, value: Any) -> int:
        """A binary label or prediction: 0 or 1, or one of model.classes [negative, positive]."""
        if self.class_index is not None and not (type(value) is int and value in (0, 1)):
            return self.class_of(value)
        return F.check_binary(value)

    def probabilities(self, value: Any) -> list[float]:
        """One probability per class: a mapping class -> p, or a list in model.classes order."""
        if self.classes is None:
            raise F.FieldError("the model's classes are not known yet (train the model, or set model.classes)")
        k = len(self.classes)
        if type(value) is dict:
            unknown = [c for c in value if class_name(c) not in self.class_index]  # type: ignore[operator]
            if unknown:
                raise F.FieldError(f"unknown class(es) {', '.join(map(F.describe, unknown[:5]))} "
                                   f"({self._known_classes()})")
            given = {class_name(c): p for c, p in value.items()}
            lacking = [c for c in self.classes if c not in given]
            if lacking:
                raise F.FieldError(f"missing class(es) {', '.join(map(repr, lacking[:5]))}: give one probability "
                                   f"per class ({k})")
            values = [given[c] for c in self.classes]
        elif type(value) is list:
            if len(value) != k:
                raise F.FieldError(f"expected {k} probabilities (one per class, in the order of "
                                   f"model.classes), got {len(value)}")
            values = value
        else:
            raise F.FieldError(f"expected an object class -> probability or a list of {k} probabilities, "
                               f"got {F.describe(value)}")
        out = []
        for c, p in zip(self.classes, values):
            try:
                out.append(F.check_score(p))
            except F.FieldError as exc:
                raise F.FieldError(f"class {c!r}: {exc}") from None
        total = math.fsum(out)
        if abs(total - 1.0) > PROBA_SUM_TOLERANCE:
            raise F.FieldError(f"probabilities sum to {total:.4f}, expected 1 (within {PROBA_SUM_TOLERANCE})")
        return out

    def _label_value(self, value: Any) -> Any:
        return self._task.read_label(value, self)

    def _features(self, errors: ErrorList, i: int, feats: Any) -> tuple | object:
        if type(feats) is not dict:
            errors.add(i, "features", f"expected an object of feature values, got {F.describe(feats)}")
            return _BAD
        before = errors.count
        for name in sorted(feats.keys() - self._featset, key=str):
            known = ", ".join(self._names[:12]) + (", ..." if len(self._names) > 12 else "")
            errors.add(i, f"features.{name}", f"unknown feature (model {self.model.name!r} has: {known})")
        values: list[Any] = []
        for spec in self.model.features:
            if spec.name not in feats:
                errors.add(i, f"features.{spec.name}", f"missing feature ({spec.type})")
                continue
            value = feats[spec.name]
            if value is None:  # a missing value (a missing vector): stored as NULL
                values.append(None)
                continue
            check = partial(F.check_feature_number, limit=self.model.max_abs_value) if spec.type == "numeric" \
                else partial(_check_category, limit=self._max_value_chars) if spec.type == "categorical" \
                else partial(F.check_embedding, dim=spec.dim or 0)
            values.append(_check(errors, i, f"features.{spec.name}", check, value))
        return _BAD if errors.count > before else tuple(values)

    def labels(self, records: list, now: int, errors: ErrorList | None = None, offset: int = 0) -> LabelBatch:
        """As :meth:`predictions`, for labels."""
        own = errors is None
        errors = ErrorList(self._max_errors) if errors is None else errors
        out: dict[str, Any] = {"ids": [], "labels": [], "ts": [], "ts_given": []}
        for i, rec in enumerate(records, offset):
            if not self._structure(errors, i, rec, LABEL_FIELDS, LABEL_REQUIRED):
                continue
            rid = _check(errors, i, "id", F.check_id, rec["id"]) if "id" in rec else _BAD
            label = _check(errors, i, self.model.target, self._label_value, rec["label"]) if "label" in rec else _BAD
            ts = rec.get("ts")
            if ts is not None:
                ts = self._ts(errors, i, ts, now)
            if errors.count:
                continue
            out["ids"].append(rid)
            out["labels"].append(label)
            out["ts"].append(now if ts is None else ts)
            out["ts_given"].append(ts is not None)
        if own:
            errors.check("label", len(records))
        return LabelBatch(**out)

    # ---- shared ------------------------------------------------------------------------------
    def _structure(self, errors: ErrorList, i: int, rec: Any, allowed: frozenset, required: frozenset) -> bool:
        """False when ``rec`` is not an object; unknown and missing fields are reported either way."""
        if type(rec) is not dict:
            errors.add(i, "(record)", f"expected an object, got {F.describe(rec)}")
            return False
        for key in sorted(rec.keys() - allowed, key=str):
            same = self.aliases.get(key) if isinstance(key, str) else None
            if same is not None and same in rec:
                errors.add(i, key, f"the same field as {same!r} (the model's name for it), which the record "
                                   "also holds: send one of them")
            else:
                errors.add(i, str(key), f"unknown field (allowed: {', '.join(sorted(allowed))})")
        for key in sorted(required - rec.keys()):
            errors.add(i, key, "required field is missing")
        return True


class _RecordOutputs:
    """One prediction record's output fields as the task reads them (:meth:`monitor.tasks.Task.read_outputs`):
    each checked, a problem listed under the field's name."""

    def __init__(self, validator: RecordByRecord, errors: ErrorList, i: int, rec: dict):
        self._errors, self._i, self._rec = errors, i, rec
        self.class_of, self.binary_class, self.probabilities, self.number = \
            validator.class_of, validator.binary_class, validator.probabilities, validator.number

    def required(self, key: str, check: Callable[[Any], Any]) -> Any:
        """The checked value of ``key`` (a missing one is already listed by the record's structure)."""
        return _check(self._errors, self._i, key, check, self._rec[key]) if key in self._rec else _BAD

    def optional(self, key: str, check: Callable[[Any], Any]) -> Any:
        """The checked value of ``key``; None when absent or null."""
        value = self._rec.get(key)
        return None if value is None else _check(self._errors, self._i, key, check, value)

    def failed(self) -> bool:
        """Whether the batch already has a problem (then nothing is built from it)."""
        return bool(self._errors.count)


def _check_category(value: Any, limit: int) -> str:
    text = F.check_text(value, "a string (categorical feature)")
    if len(text) > limit:
        raise F.FieldError(f"expected a categorical value of at most {limit} characters (model.max_value_chars), "
                           f"got a string of {len(text)} characters")
    return text


def _check(errors: ErrorList, i: int, field: str, check: Callable[[Any], Any], value: Any) -> Any:
    try:
        return check(value)
    except F.FieldError as exc:
        errors.add(i, field, str(exc))
        return _BAD
