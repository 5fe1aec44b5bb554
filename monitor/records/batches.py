"""Validated batches, column-wise, and the error list a refused batch carries."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Iterator, Protocol, Sequence, runtime_checkable

from monitor.errors import ValidationError
from monitor.records.fields import describe


@dataclass(frozen=True)
class PredictionBatch:
    """Validated predictions, column-wise. ``features`` holds one list per feature, in the model's
    feature order (numeric values as float, an embedding's vector as its stored float32 bytes, see
    :mod:`monitor.embeddings`). A batch validated a chunk at a time holds each column of floats
    (features, scores, probabilities) as an ``array("d")`` instead of a list: read it by index or
    by iterating, never as a list. ``ts`` is microseconds since the epoch, UTC.
    ``model_versions`` is the version that scored each row, or None when the sender did not say.
    ``positions`` maps each row to its index in the request when repeats were dropped."""
    ids: list[str]
    ts: list[int]
    ts_given: list[bool]
    features: Sequence[Sequence]
    scores: Sequence[float]
    predictions: list[int]
    prediction_given: list[bool]
    # The registry version of the model that scored each row (None: not said, read as "unknown").
    model_versions: list[str | None]
    duplicates: int = 0  # identical repeats inside the batch, dropped
    positions: list[int] | None = None
    # multiclass: one list per class (in model.classes order) of each row's probability; else None.
    probas: Sequence[Sequence[float]] | None = None
    # Each row's raw-input reference (input_uri), None where not given; None here: no row has one.
    input_uris: list[str | None] | None = None

    def position(self, row: int) -> int:
        return row if self.positions is None else self.positions[row]

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class LabelBatch:
    ids: list[str]
    labels: Sequence[int] | Sequence[float]  # 0/1, a class index (multiclass) or a number (regression)
    ts: list[int]
    ts_given: list[bool]
    duplicates: int = 0
    positions: list[int] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def position(self, row: int) -> int:
        return row if self.positions is None else self.positions[row]


@runtime_checkable
class RecordChunks(Protocol):
    """A batch handed over a list of records at a time, in order, never all at once
    (:class:`monitor.ingest.parsing.ChunkedBody`: a large request body). Iterating may raise what
    reading the batch whole would (a malformed body, too many records)."""

    def __iter__(self) -> Iterator[list]: ...

    def records_at(self, indices: Collection[int]) -> dict[int, Any]:
        """The records at these positions of the batch, read again."""
        ...


class ErrorList:
    def __init__(self, cap: int):
        self.items: list[dict] = []
        self.count = 0
        self.cap = cap

    def add(self, index: int | None, field: str, message: str) -> None:
        self.count += 1
        if len(self.items) < self.cap:  # a field name or value the sender made up is shown shortened
            self.items.append({"index": index, "field": _short(field, MAX_FIELD_CHARS),
                               "message": _short(message, MAX_MESSAGE_CHARS)})

    def check(self, kind: str, n: int) -> None:
        if self.count:
            listed = "" if self.count <= len(self.items) else f" (first {len(self.items)} listed)"
            raise ValidationError(f"{self.count} problem(s) in a batch of {n} {kind} records{listed}; "
                                  "nothing from this batch was stored", self.items)


MAX_FIELD_CHARS = 200     # an error's field name (an unknown field of 10 MB was echoed whole)
MAX_MESSAGE_CHARS = 2000  # an error's message (it may list a wide model's fields)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def as_record_list(records: Any) -> list:
    """A batch as a list; anything that is not a sequence of records is a validation error."""
    if isinstance(records, list):
        return records
    if isinstance(records, tuple):
        return list(records)
    raise ValidationError("expected a list of records",
                          [{"index": None, "field": "(body)", "message": "expected a list of records, got "
                                                                         f"{describe(records)}"}])
