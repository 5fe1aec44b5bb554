"""Validate a batch of prediction or label records against the model schema (``cfg.model``).

A batch is accepted whole or rejected whole. The hot path checks the batch column by column with
C-level ``map``/``set``/``sum`` (about two microseconds per record of 20 features); it answers only
"all good" or "something is off". When something is off, a second pass walks the records one by one
(:mod:`monitor.records.slowpass`) and reports every problem as ``{"index", "field", "message"}``.
Both passes build the same normalised :class:`PredictionBatch`; the tests hold them to that.

A large batch may come as :class:`~monitor.records.batches.RecordChunks` (a request body parsed a
chunk at a time): each chunk is checked as above and its columns appended, so that only the
columns, never every record's dicts, are held at once; the batch, the problems listed and their
indices are those of the batch checked whole.
"""
from __future__ import annotations

import time
from array import array
from collections import Counter
from dataclasses import fields, replace
from itertools import chain, repeat
from operator import itemgetter
from typing import Any, Callable, Collection, Protocol, TypeVar

from monitor.config import ModelConfig
from monitor.records import embedded
from monitor.records import fastpath as fast
from monitor.records.batches import ErrorList, LabelBatch, PredictionBatch, RecordChunks, as_record_list
from monitor.records.inputs import InputRoots
from monitor.records.slowpass import LABEL_FIELDS, LABEL_REQUIRED, RecordByRecord
from monitor.tasks import task_of

MAX_LISTED_ERRORS = 50
# Distinct values of a column that a chunked batch shares between its rows (see _Gathered).
MAX_INTERNED = 4096
_FLOAT = {float}
Batch = TypeVar("Batch", PredictionBatch, LabelBatch)


class _Records(Protocol):
    """What de-duplication reads of a batch's records: their number, and one by index."""

    def __len__(self) -> int: ...

    def __getitem__(self, i: int) -> Any: ...


class RecordValidator:
    """Turns raw records (dicts as parsed from JSON) into validated batches for ``model``."""

    def __init__(self, model: ModelConfig, clock: Callable[[], float] = time.time,
                 max_errors: int = MAX_LISTED_ERRORS):
        self.model = model
        self._clock = clock
        self._max_errors = max_errors
        self._names = model.feature_names
        self._numeric = [i for i, f in enumerate(model.features) if f.type == "numeric"]
        self._categorical = [i for i, f in enumerate(model.features) if f.type == "categorical"]
        # Longer categorical values are refused: each one is stored, drawn in every report and
        # carried in check results while it sits in the window (model.max_value_chars).
        self._max_value_chars = model.max_value_chars
        # Larger numbers (features, a regression's prediction and label) are refused: stored, each would
        # sit in every check's window (model.max_abs_value; float32's range by default).
        self._max_abs = model.max_abs_value
        # The pass that names each problem when this one declines; it holds the record fields and
        # the classes of the model's task too.
        self._slow = RecordByRecord(model, max_errors)
        # Where an input_uri may point (model.input_roots, input_schemes); the slow pass names refusals.
        self._inputs = InputRoots.of(model)
        # Embedding features (position, dim): a list of dim numbers each, stored as float32 bytes.
        self._embedded = [(i, f.dim or 0) for i, f in enumerate(model.features) if f.type == "embedding"]
        self._getters = [itemgetter(name) for name in self._names]
        self._row_getter = itemgetter(*self._names) if len(self._names) > 1 else None
        # The configured column names are accepted on the wire as well as the generic keys:
        # with model.target = churned, {"id": "c1", "churned": 1} is a label record. Which outputs
        # take them is the task's (a regression model's one output is its prediction, never a score).
        self._task = task_of(model)
        configured = {"score": model.score, "prediction": model.prediction}
        self._prediction_aliases = {configured[k]: k for k in self._task.aliased_outputs if configured[k] != k}
        self._label_aliases = {model.target: "label"} if model.target != "label" else {}
        self._slow.aliases = {**self._prediction_aliases, **self._label_aliases}  # to name a record holding both
        # Accepted batches by kind and path, e.g. paths["label", "fast"]: a client whose batches all
        # take the slow path pays several times the validation cost. Increments from concurrent
        # request threads may race; this is a statistic, not an account.
        self.paths: Counter[tuple[str, str]] = Counter()

    def _too_late(self, us: list[int], now: int) -> bool:
        """Whether a time lies past model.max_future_seconds after ``now``: the slow pass names it."""
        bound = self._slow.future_us
        return bound is not None and bool(us) and max(us) > now + bound

    def _now_us(self) -> int:
        return int(self._clock() * 1_000_000)

    # ---- predictions -------------------------------------------------------------------------
    def predictions(self, records: Any) -> PredictionBatch:
        if isinstance(records, RecordChunks):
            return self._gathered(records, PredictionBatch)
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
                                   probas=self._task.batch_probas(self.model.n_classes))
        try:
            if not fast.dicts_with_keys(records, self._slow.pred_fields, self._slow.pred_required):
                return None
            ids = list(map(itemgetter("id"), records))
            if not fast.good_ids(ids):
                return None
            cols = self._fast_features(list(map(itemgetter("features"), records)))
            if cols is None:
                return None
            uris = embedded.fast_uris(list(map(dict.get, records, repeat("input_uri", n))))
            if uris is None or not self._inputs.all_allowed(uris):
                return None
            outputs = self._fast_outputs(records)
            if outputs is None:
                return None
            scores, preds, given, probas = outputs
            if not fast.within([scores], self._max_abs):  # a classifier's scores lie in [0, 1]: always
                return None
            ts = fast.timestamps(list(map(dict.get, records, repeat("ts", n))), now)
            if ts is None or self._too_late(ts[0], now):
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
        return self._task.fast_outputs(records, self._slow.classes, self._slow.class_index, self.model.threshold)

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
            if not fast.all_finite(present) or not fast.within(present, self._max_abs):
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
        return self._slow.predictions(records, now)

    # ---- labels ------------------------------------------------------------------------------
    def labels(self, records: Any) -> LabelBatch:
        if isinstance(records, RecordChunks):
            return self._gathered(records, LabelBatch)
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
            if not fast.dicts_with_keys(records, LABEL_FIELDS, LABEL_REQUIRED):
                return None
            ids = list(map(itemgetter("id"), records))
            if not fast.good_ids(ids):
                return None
            labels = self._fast_label_values(list(map(itemgetter("label"), records)))
            if labels is None or not self._task.labels_within(labels, self._max_abs):
                return None
            ts = fast.timestamps(list(map(dict.get, records, repeat("ts", n))), now)
            if ts is None or self._too_late(ts[0], now):
                return None
        except (TypeError, ValueError, KeyError, OverflowError):
            return None
        return LabelBatch(ids, labels, ts[0], ts[1])

    def _fast_label_values(self, raw: list) -> list | None:
        """As the record-by-record label check (``RecordByRecord._label_value``) for a whole column:
        a number (regression), a class (multiclass), 0/1 or one of the two classes (binary); None
        when any needs the slow path's words."""
        return self._task.fast_labels(raw, self._slow.class_index)

    def slow_labels(self, records: list, now: int) -> LabelBatch:
        return self._slow.labels(records, now)

    # ---- shared ------------------------------------------------------------------------------
    def _gathered(self, chunks: RecordChunks, kind: type[Batch]) -> Batch:
        """A batch checked a chunk at a time: the fast path on each chunk, the record-by-record pass
        on a chunk it declines (its problems listed under their index in the batch), the columns
        of each chunk appended as it is checked. The same batch, or the same ValidationError, as
        :meth:`predictions` or :meth:`labels` of the whole list."""
        if kind is PredictionBatch:
            name, aliases, shared = "prediction", self._prediction_aliases, self._categorical
            fast_path: Callable[[list, int], Any] = self._fast_predictions
            slow_path: Callable[..., Any] = self._slow.predictions
        else:
            name, aliases, shared = "label", self._label_aliases, []
            fast_path, slow_path = self._fast_labels, self._slow.labels
        now = self._now_us()
        errors = ErrorList(self._max_errors)
        gathered = _Gathered(shared)
        n, path = 0, "fast"
        for chunk in chunks:
            chunk = _renamed(chunk, aliases)
            part = fast_path(chunk, now)
            if part is None:
                path = "slow"
                part = slow_path(chunk, now, errors, n)
            if not errors.count:
                gathered.add(part)
            n += len(chunk)
            del chunk, part  # not alive while the next chunk is parsed
        if errors.count:
            del gathered  # the refusal's traceback keeps this frame, not the columns
            errors.check(name, n)
        if not gathered.columns:  # no chunk at all: the empty batch
            gathered.add(fast_path([], now))
        batch = gathered.batch(kind)
        del gathered
        self.paths[name, path] += 1
        return self._dedupe(_Reread(chunks, batch.ids, aliases, n), batch, name)

    def _dedupe(self, records: _Records, batch, kind: str):
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


class _Gathered:
    """The columns of a batch checked a chunk at a time, appended chunk by chunk.

    A column of floats (numeric features, scores, probabilities) is kept as an ``array("d")``: 8
    bytes a value where a float object and its pointer take 32, three quarters of a typical batch's
    columns. It reads as the list would (indexing and iterating give floats). The values of
    ``shared`` feature columns (categorical) and the model versions are shared between rows, up to
    :data:`MAX_INTERNED` distinct ones a column: orjson makes a new string for every ``"north"``,
    about 55 bytes where the column's pointer takes 8."""

    def __init__(self, shared: Collection[int]):
        self.columns: dict[str, Any] = {}
        self.rows = 0
        self._shared: dict[int, dict] = {j: {} for j in shared}
        self._versions: dict = {}

    def add(self, part: PredictionBatch | LabelBatch) -> None:
        for f in fields(part):
            if f.name in ("duplicates", "positions"):
                continue
            value = getattr(part, f.name)
            if f.name == "features":
                value = [_interned(col, self._shared[j]) if j in self._shared else col for j, col in enumerate(value)]
            elif f.name == "model_versions":
                value = _interned(value, self._versions)
            if f.name in ("features", "probas"):  # one list per column
                self._extend_columns(f.name, value, len(part))
            else:
                self.columns[f.name] = self._extended(self.columns.get(f.name), value, len(part))
        self.rows += len(part)

    def _extended(self, have: Any, values: list | None, n: int) -> Any:
        """``have`` (None: no row so far has a value; an array of floats; a list) with ``values``
        appended (None: the ``n`` new rows have none)."""
        if values is None:
            return None if have is None else _appended(have, [None] * n)
        if have is None:
            have = array("d") if self.rows == 0 else [None] * self.rows
        return _appended(have, values)

    def _extend_columns(self, name: str, columns: list[list] | None, n: int) -> None:
        if self.rows == 0:
            self.columns[name] = None if columns is None else [self._extended(None, c, n) for c in columns]
            return
        have = self.columns[name]
        # The task decides whether a batch has these columns (probabilities): every chunk alike.
        assert (have is None) == (columns is None), f"{name}: chunks of one batch disagree"
        if have is not None and columns is not None:
            self.columns[name] = [_appended(column, more) for column, more in zip(have, columns)]

    def batch(self, kind: type[Batch]) -> Batch:
        return kind(**self.columns)


def _appended(column: Any, values: list) -> Any:
    """``values`` appended to ``column``: an array of floats while they all are floats, else a list."""
    if type(column) is array:
        if set(map(type, values)) <= _FLOAT:
            column.extend(values)
            return column
        column = column.tolist()
    column.extend(values)
    return column



def _interned(values: list, seen: dict) -> list:
    """``values`` with equal ones the same object (``seen`` maps each to the first), while ``seen``
    holds fewer than :data:`MAX_INTERNED` (a column of ids or free text would only grow it)."""
    if len(seen) >= MAX_INTERNED:
        return values
    return list(map(seen.setdefault, values, values))


class _Reread:
    """The records of a chunked batch by index, for :meth:`RecordValidator._dedupe`: only those
    whose id repeats are asked for, read again from their chunks on first use."""

    def __init__(self, chunks: RecordChunks, ids: list, aliases: dict[str, str], n: int):
        self._chunks, self._ids, self._aliases, self._n = chunks, ids, aliases, n
        self._records: dict[int, Any] | None = None

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> Any:
        if self._records is None:
            repeated = {rid for rid, times in Counter(self._ids).items() if times > 1}
            wanted = [i for i, rid in enumerate(self._ids) if rid in repeated]
            found = self._chunks.records_at(wanted)
            self._records = dict(zip(found, _renamed(list(found.values()), self._aliases)))
        return self._records[i]


def _renamed(records: list, aliases: dict[str, str]) -> list:
    """Records with configured names (``churned``) under the generic keys (``label``). A record
    holding both keeps both, and its alias is then reported as the same field given twice."""
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
