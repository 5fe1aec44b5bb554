"""Validate a batch of prediction or label records against the model schema (``cfg.model``).

A batch is accepted whole or rejected whole. The hot path checks the batch column by column with
C-level ``map``/``set``/``sum`` (about two microseconds per record of 20 features); it answers only
"all good" or "something is off". When something is off, a second pass walks the records one by one
with :mod:`monitor.records.fields` and reports every problem as ``{"index", "field", "message"}``.
Both passes build the same normalised :class:`PredictionBatch`; the tests hold them to that.
"""
from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import fields, replace
from functools import partial
from itertools import chain, repeat
from operator import itemgetter
from typing import Any, Callable

from monitor.config import ModelConfig
from monitor.records import embedded
from monitor.records import fastpath as fast
from monitor.records import fields as F
from monitor.records.batches import ErrorList, LabelBatch, PredictionBatch, as_record_list
from monitor.tasks import PROBA_SUM_TOLERANCE, class_name

MAX_LISTED_ERRORS = 50
_PRED_FIELDS = frozenset({"id", "ts", "features", "score", "prediction", "model_version", "input_uri"})
_PRED_REQUIRED = frozenset({"id", "features", "score"})
_LABEL_FIELDS = frozenset({"id", "ts", "label"})
_LABEL_REQUIRED = frozenset({"id", "label"})
# The prediction fields per task (monitor.tasks): binary as above; a multiclass record carries the
# class probabilities (and optionally the served class); a regression record the predicted value.
_TASK_PRED_FIELDS = {
    "binary": (_PRED_FIELDS, _PRED_REQUIRED),
    "multiclass": (frozenset({"id", "ts", "features", "probabilities", "prediction", "model_version", "input_uri"}),
                   frozenset({"id", "features", "probabilities"})),
    "regression": (frozenset({"id", "ts", "features", "prediction", "model_version", "input_uri"}),
                   frozenset({"id", "features", "prediction"})),
}
_BAD = object()


class RecordValidator:
    """Turns raw records (dicts as parsed from JSON) into validated batches for ``model``."""

    def __init__(self, model: ModelConfig, clock: Callable[[], float] = time.time,
                 max_errors: int = MAX_LISTED_ERRORS):
        self.model = model
        self._clock = clock
        self._max_errors = max_errors
        self._names = model.feature_names
        self._featset = frozenset(self._names)
        self._numeric = [i for i, f in enumerate(model.features) if f.type == "numeric"]
        self._categorical = [i for i, f in enumerate(model.features) if f.type == "categorical"]
        # Longer categorical values are refused: each one is stored, drawn in every report and
        # carried in check results while it sits in the window (model.max_value_chars).
        self._max_value_chars = model.max_value_chars
        # Embedding features (position, dim): a list of dim numbers each, stored as float32 bytes.
        self._embedded = [(i, f.dim or 0) for i, f in enumerate(model.features) if f.type == "embedding"]
        self._getters = [itemgetter(name) for name in self._names]
        self._row_getter = itemgetter(*self._names) if len(self._names) > 1 else None
        # The configured column names are accepted on the wire as well as the generic keys:
        # with model.target = churned, {"id": "c1", "churned": 1} is a label record.
        self._prediction_aliases = {n: k for n, k in ((model.score, "score"), (model.prediction, "prediction"))
                                    if n != k}
        self._label_aliases = {model.target: "label"} if model.target != "label" else {}
        self._task = model.task
        self._pred_fields, self._pred_required = _TASK_PRED_FIELDS[model.task]
        if model.task == "regression":  # its one output is the predicted value, sent as prediction
            self._prediction_aliases = {n: k for n, k in ((model.prediction, "prediction"),) if n != k}
        # Classes by name; a binary model without classes takes 0 and 1 only (as before).
        self._classes = list(model.classes) if model.classes else None
        self._class_index = {c: i for i, c in enumerate(self._classes)} if self._classes else None
        # Accepted batches by kind and path, e.g. paths["label", "fast"]: a client whose batches all
        # take the slow path pays several times the validation cost. Increments from concurrent
        # request threads may race; this is a statistic, not an account.
        self.paths: Counter[tuple[str, str]] = Counter()

    def _now_us(self) -> int:
        return int(self._clock() * 1_000_000)

    # ---- predictions -------------------------------------------------------------------------
    def predictions(self, records: Any) -> PredictionBatch:
        records = _renamed(as_record_list(records), self._prediction_aliases)
        now = self._now_us()
        batch, path = self._fast_predictions(records, now), "fast"
        if batch is None:
            batch, path = self.slow_predictions(records, now), "slow"
        self.paths["prediction", path] += 1
        return self._dedupe(records, batch, "prediction")

    def _fast_predictions(self, records: list, now: int) -> PredictionBatch | None:
        """The whole batch checked column by column (:mod:`monitor.records.fastpath`), every task."""
        n = len(records)
        if n == 0:
            return PredictionBatch([], [], [], [[] for _ in self._names], [], [], [], [], input_uris=[],
                                   probas=[[] for _ in range(self.model.n_classes)]
                                   if self._task == "multiclass" else None)
        try:
            if not fast.dicts_with_keys(records, self._pred_fields, self._pred_required):
                return None
            ids = list(map(itemgetter("id"), records))
            if not fast.good_ids(ids):
                return None
            cols = self._fast_features(list(map(itemgetter("features"), records)))
            if cols is None:
                return None
            uris = embedded.fast_uris(list(map(dict.get, records, repeat("input_uri", n))))
            if uris is None:
                return None
            outputs = self._fast_outputs(records)
            if outputs is None:
                return None
            scores, preds, given, probas = outputs
            ts = fast.timestamps(list(map(dict.get, records, repeat("ts", n))), now)
            if ts is None:
                return None
            versions = fast.versions(list(map(dict.get, records, repeat("model_version", n))))
            if versions is None:
                return None
        except (TypeError, ValueError, KeyError, OverflowError):
            return None
        return PredictionBatch(ids, ts[0], ts[1], cols, scores, preds, given, versions, input_uris=uris,
                               probas=probas)

    def _fast_outputs(self, records: list) -> tuple[list, list, list, list[list[float]] | None] | None:
        """(scores, class indices, prediction given, per-class probabilities) of the model's task."""
        if self._task == "regression":
            return fast.regression_outputs(records)
        if self._task == "multiclass":
            return fast.multiclass_outputs(records, self._classes, self._class_index)
        return fast.binary_outputs(records, self.model.threshold)

    def _fast_features(self, feats: list) -> list[list] | None:
        # Every configured name present (the getters raise KeyError otherwise) and no more keys
        # than names: exactly the configured features.
        if set(map(type, feats)) != {dict} or set(map(len, feats)) != {len(self._names)}:
            return None
        cols = self._feature_columns(feats)
        # null is a missing value, stored as NULL: a monitored signal, handled by the model.
        for j in self._categorical:
            types = set(map(type, cols[j]))
            if not types <= fast.OPTIONAL_STR:
                return None
            texts = cols[j] if types == fast.STR else [v for v in cols[j] if v is not None]
            if not fast.clean_text(texts) or (texts and max(map(len, texts)) > self._max_value_chars):
                return None
        if self._numeric:
            types = set(map(type, chain.from_iterable(cols[j] for j in self._numeric)))
            if not types <= fast.OPTIONAL_FEATURE_NUMBER:
                return None
            present = [cols[j] for j in self._numeric]
            if type(None) in types:
                present = [[v for v in col if v is not None] for col in present]
            if int in types or bool in types:  # float(True) is 1.0: the slow path's rule
                for j in self._numeric:  # stored as float; OverflowError -> slow path
                    cols[j] = [v if v is None else float(v) for v in cols[j]] if type(None) in types \
                        else list(map(float, cols[j]))
            if not fast.all_finite(present):
                return None
        for j, dim in self._embedded:
            blobs = embedded.fast_column(cols[j], dim)
            if blobs is None:
                return None
            cols[j] = blobs
        return cols

    def _feature_columns(self, feats: list[dict]) -> list[list]:
        """One list per configured feature, in order (KeyError when a record lacks one). One lookup
        of all names per record, then a transpose: a getter per feature walked every record's dict
        once per feature, 2.5 times the CPU (bench/bench_ingest.py)."""
        if self._row_getter is None:  # itemgetter of one name returns the value, not a tuple
            return [list(map(get, feats)) for get in self._getters]
        return list(map(list, zip(*map(self._row_getter, feats))))

    def slow_predictions(self, records: list, now: int) -> PredictionBatch:
        """Record-by-record validation: every problem reported, or the same batch as the fast path."""
        errors = ErrorList(self._max_errors)
        out: dict[str, Any] = {f.name: [] for f in fields(PredictionBatch)
                               if f.name not in ("duplicates", "positions", "probas")}
        probas: list[list[float]] = []
        for i, rec in enumerate(records):
            if not self._structure(errors, i, rec, self._pred_fields, self._pred_required):
                continue
            rid = _check(errors, i, "id", F.check_id, rec["id"]) if "id" in rec else _BAD
            feats = self._features(errors, i, rec["features"]) if "features" in rec else _BAD
            row_probas: Any = None
            score: Any = _BAD
            if self._task == "binary":
                score = _check(errors, i, "score", F.check_score, rec["score"]) if "score" in rec else _BAD
                pred = rec.get("prediction")
                if pred is not None:
                    pred = _check(errors, i, "prediction", self._binary_class, pred)
            elif self._task == "regression":
                score = _check(errors, i, "prediction", F.check_number, rec["prediction"]) \
                    if "prediction" in rec else _BAD
                pred = 0
            else:
                row_probas = _check(errors, i, "probabilities", self._probabilities, rec["probabilities"]) \
                    if "probabilities" in rec else _BAD
                pred = rec.get("prediction")
                if pred is not None:
                    pred = _check(errors, i, "prediction", self._class_of, pred)
                if not errors.count and row_probas is not _BAD and row_probas is not None:
                    if pred is None:
                        pred = max(range(len(row_probas)), key=row_probas.__getitem__)
                    score = row_probas[pred]
            ts = rec.get("ts")
            if ts is not None:
                ts = _check(errors, i, "ts", F.check_ts, ts)
            version = rec.get("model_version")
            if version is not None:
                version = _check(errors, i, "model_version", F.check_model_version, version)
            uri = rec.get("input_uri")
            if uri is not None:
                uri = _check(errors, i, "input_uri", F.check_input_uri, uri)
            if errors.count:
                continue  # stop building once the batch is lost; keep collecting errors
            out["ids"].append(rid)
            out["ts"].append(now if ts is None else ts)
            out["ts_given"].append(ts is not None)
            out["features"].append(feats)
            out["scores"].append(score)
            out["predictions"].append(int(score > self.model.threshold) if pred is None else pred)
            out["prediction_given"].append(self._task == "regression" or rec.get("prediction") is not None)
            out["model_versions"].append(version)
            out["input_uris"].append(uri)
            if row_probas is not None:
                probas.append(row_probas)
        errors.check("prediction", len(records))
        rows = out.pop("features")
        columns = [list(c) for c in zip(*rows)] if rows else [[] for _ in self._names]
        proba_columns = None
        if self._task == "multiclass":
            proba_columns = [list(c) for c in zip(*probas)] if probas else [[] for _ in range(self.model.n_classes)]
        return PredictionBatch(features=columns, **out, probas=proba_columns)

    # ---- per-task outputs ---------------------------------------------------------------------
    def _known_classes(self) -> str:
        assert self._classes is not None
        shown = ", ".join(map(repr, self._classes[:12])) + (", ..." if len(self._classes) > 12 else "")
        return f"model {self.model.name!r} has classes {shown}"

    def _class_of(self, value: Any) -> int:
        """A class name (or a number equal to one) -> its index; FieldError naming the classes."""
        if self._class_index is None:
            raise F.FieldError("the model's classes are not known yet (train the model, or set model.classes)")
        if type(value) not in (str, int, float) or type(value) is bool:
            raise F.FieldError(f"expected a class name, got {F.describe(value)} ({self._known_classes()})")
        index = self._class_index.get(class_name(value))
        if index is None:
            raise F.FieldError(f"unknown class {value!r} ({self._known_classes()})")
        return index

    def _binary_class(self, value: Any) -> int:
        """A binary label or prediction: 0 or 1, or one of model.classes [negative, positive]."""
        if self._class_index is not None and not (type(value) is int and value in (0, 1)):
            return self._class_of(value)
        return F.check_binary(value)

    def _probabilities(self, value: Any) -> list[float]:
        """One probability per class: a mapping class -> p, or a list in model.classes order."""
        if self._classes is None:
            raise F.FieldError("the model's classes are not known yet (train the model, or set model.classes)")
        k = len(self._classes)
        if type(value) is dict:
            unknown = [c for c in value if class_name(c) not in self._class_index]  # type: ignore[operator]
            if unknown:
                raise F.FieldError(f"unknown class(es) {', '.join(map(repr, unknown[:5]))} ({self._known_classes()})")
            given = {class_name(c): p for c, p in value.items()}
            lacking = [c for c in self._classes if c not in given]
            if lacking:
                raise F.FieldError(f"missing class(es) {', '.join(map(repr, lacking[:5]))}: give one probability "
                                   f"per class ({k})")
            values = [given[c] for c in self._classes]
        elif type(value) is list:
            if len(value) != k:
                raise F.FieldError(f"expected {k} probabilities (one per class, in the order of "
                                   f"model.classes), got {len(value)}")
            values = value
        else:
            raise F.FieldError(f"expected an object class -> probability or a list of {k} probabilities, "
                               f"got {F.describe(value)}")
        out = []
        for c, p in zip(self._classes, values):
            try:
                out.append(F.check_score(p))
            except F.FieldError as exc:
                raise F.FieldError(f"class {c!r}: {exc}") from None
        total = math.fsum(out)
        if abs(total - 1.0) > PROBA_SUM_TOLERANCE:
            raise F.FieldError(f"probabilities sum to {total:.4f}, expected 1 (within {PROBA_SUM_TOLERANCE})")
        return out

    def _label_value(self, value: Any) -> Any:
        if self._task == "regression":
            return F.check_number(value)
        if self._task == "multiclass":
            return self._class_of(value)
        return self._binary_class(value)

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
            check = F.check_feature_number if spec.type == "numeric" \
                else partial(_check_category, limit=self._max_value_chars) if spec.type == "categorical" \
                else partial(F.check_embedding, dim=spec.dim or 0)
            values.append(_check(errors, i, f"features.{spec.name}", check, value))
        return _BAD if errors.count > before else tuple(values)

    # ---- labels ------------------------------------------------------------------------------
    def labels(self, records: Any) -> LabelBatch:
        records = _renamed(as_record_list(records), self._label_aliases)
        now = self._now_us()
        batch, path = self._fast_labels(records, now), "fast"
        if batch is None:
            batch, path = self.slow_labels(records, now), "slow"
        self.paths["label", path] += 1
        return self._dedupe(records, batch, "label")

    def _fast_labels(self, records: list, now: int) -> LabelBatch | None:
        n = len(records)
        if n == 0:
            return LabelBatch([], [], [], [])
        try:
            if not fast.dicts_with_keys(records, _LABEL_FIELDS, _LABEL_REQUIRED):
                return None
            ids = list(map(itemgetter("id"), records))
            if not fast.good_ids(ids):
                return None
            labels = self._fast_label_values(list(map(itemgetter("label"), records)))
            if labels is None:
                return None
            ts = fast.timestamps(list(map(dict.get, records, repeat("ts", n))), now)
            if ts is None:
                return None
        except (TypeError, ValueError, KeyError, OverflowError):
            return None
        return LabelBatch(ids, labels, ts[0], ts[1])

    def _fast_label_values(self, raw: list) -> list | None:
        """As :meth:`_label_value` for a whole column: a number (regression), a class (multiclass),
        0/1 or one of the two classes (binary); None when any needs the slow path's words."""
        if self._task == "regression":
            return fast.numbers(raw)
        if self._task == "binary" and set(map(type, raw)) == {int} and set(raw) <= {0, 1}:
            return raw
        return fast.class_indices(raw, self._class_index)

    def slow_labels(self, records: list, now: int) -> LabelBatch:
        errors = ErrorList(self._max_errors)
        out: dict[str, Any] = {"ids": [], "labels": [], "ts": [], "ts_given": []}
        for i, rec in enumerate(records):
            if not self._structure(errors, i, rec, _LABEL_FIELDS, _LABEL_REQUIRED):
                continue
            rid = _check(errors, i, "id", F.check_id, rec["id"]) if "id" in rec else _BAD
            label = _check(errors, i, self.model.target, self._label_value, rec["label"]) if "label" in rec else _BAD
            ts = rec.get("ts")
            if ts is not None:
                ts = _check(errors, i, "ts", F.check_ts, ts)
            if errors.count:
                continue
            out["ids"].append(rid)
            out["labels"].append(label)
            out["ts"].append(now if ts is None else ts)
            out["ts_given"].append(ts is not None)
        errors.check("label", len(records))
        return LabelBatch(**out)

    # ---- shared ------------------------------------------------------------------------------
    @staticmethod
    def _structure(errors: ErrorList, i: int, rec: Any, allowed: frozenset, required: frozenset) -> bool:
        """False when ``rec`` is not an object; unknown and missing fields are reported either way."""
        if type(rec) is not dict:
            errors.add(i, "(record)", f"expected an object, got {F.describe(rec)}")
            return False
        for key in sorted(rec.keys() - allowed, key=str):
            errors.add(i, str(key), f"unknown field (allowed: {', '.join(sorted(allowed))})")
        for key in sorted(required - rec.keys()):
            errors.add(i, key, "required field is missing")
        return True

    def _dedupe(self, records: list, batch, kind: str):
        """Identical repeats of an id inside one batch are dropped; differing ones reject the batch."""
        ids = batch.ids
        if len(set(ids)) == len(ids):
            return batch
        errors = ErrorList(self._max_errors)
        first: dict[str, int] = {}
        keep: list[int] = []
        for i, rid in enumerate(ids):
            j = first.setdefault(rid, i)
            if j == i:
                keep.append(i)
            elif not _same(records[i], records[j]):
                errors.add(i, "id", f"id {rid!r} appears again in this batch (first at index {j}) with different "
                                    "content")
        errors.check(kind, len(records))
        columns = {f.name: [getattr(batch, f.name)[i] for i in keep]
                   for f in fields(batch) if f.name not in ("duplicates", "positions", "features", "probas")
                   and getattr(batch, f.name) is not None}
        if isinstance(batch, PredictionBatch):
            columns["features"] = [[col[i] for i in keep] for col in batch.features]
            if batch.probas is not None:
                columns["probas"] = [[col[i] for i in keep] for col in batch.probas]
        return replace(batch, **columns, duplicates=len(ids) - len(keep), positions=keep)


def _renamed(records: list, aliases: dict[str, str]) -> list:
    """Records with configured names (``churned``) under the generic keys (``label``). A record
    holding both keeps both, and its alias is then reported as an unknown field."""
    if not aliases:
        return records
    out = []
    for rec in records:
        if type(rec) is dict and not aliases.keys().isdisjoint(rec):
            rec = {(aliases[k] if k in aliases and aliases[k] not in rec else k): v for k, v in rec.items()}
        out.append(rec)
    return out


def _same(a: Any, b: Any) -> bool:
    """Equal records; numpy arrays (embeddings from Python callers) compared by value."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if type(a).__name__ == "ndarray":
        return a.shape == b.shape and bool((a == b).all())
    return bool(a == b)


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
