"""Large bodies read a chunk of records at a time (monitor.ingest.parsing.ChunkedBody, validated by
RecordValidator chunk by chunk) answer exactly as the body read whole: the same batch, or the same
status, message and listed problems. Chunks of a few bytes here, so that every batch is cut many
times (property-tested, with the records of test_validation)."""
from __future__ import annotations

import json
from array import array
from dataclasses import fields

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.errors import RequestError, ValidationError
from monitor.ingest import parsing
from monitor.records.batches import RecordChunks
from monitor.records.validation import RecordValidator
from tests.monitor.ingest.test_validation import NOW, maybe_bad_record, text, valid_record
from tests.monitor.store.factories import prediction, predictions, small_model

validator = RecordValidator(small_model(), clock=lambda: NOW, max_errors=5)


def outcome(body: bytes, kind: str = "json", chunk_bytes: int | None = None, what: str = "predictions",
            max_records: int | None = 1000):
    """What the handler answers for ``body``: read whole (``chunk_bytes`` None) or in chunks of
    ``chunk_bytes``, parsed whole where it cannot be cut (IngestHandler._validated)."""
    validate = getattr(validator, what)
    try:
        if chunk_bytes is not None:
            try:
                return _plain(validate(parsing.ChunkedBody(body, kind, max_records, chunk_bytes)))
            except parsing.Unsplittable:
                pass
        records = parsing.parse_records(body, kind, max_records)
        parsing.check_count(len(records), max_records)
        return _plain(validate(records))
    except (RequestError, ValidationError) as exc:
        return type(exc).__name__, getattr(exc, "status", None), str(exc), getattr(exc, "errors", None)


def _plain(batch) -> dict:
    """The batch's fields, columns of floats as lists."""
    def plain(value):
        if isinstance(value, array):
            return value.tolist()
        if isinstance(value, list) and value and isinstance(value[0], (list, array)):
            return [plain(v) for v in value]
        return value
    return {f.name: plain(getattr(batch, f.name)) for f in fields(batch)}


def layouts(records: list) -> list[tuple[bytes, str]]:
    """The same records as clients send them: compact, pretty-printed, ``{"records": ...}``, NDJSON."""
    return [(orjson.dumps(records), "json"),
            (json.dumps(records, indent=2).encode(), "json"),
            (b" \r\n" + json.dumps({"records": records}, separators=(" , ", " : ")).encode() + b"\n", "json"),
            (orjson.dumps({"records": records}), "json"),
            (b"\n".join(orjson.dumps(r) for r in records) + b"\n", "ndjson")]


def assert_same(body: bytes, kind: str = "json", what: str = "predictions", sizes=(1, 7, 60, 400), **kw):
    whole = outcome(body, kind, None, what, **kw)
    for size in sizes:
        assert outcome(body, kind, size, what, **kw) == whole, (size, body[:200])
    return whole


@settings(max_examples=150, deadline=None)
@given(st.lists(valid_record, max_size=12), st.integers(1, 300))
def test_valid_batches_are_the_same_whole_or_in_chunks(records, size):
    for body, kind in layouts(records):
        assert outcome(body, kind, size) == outcome(body, kind)


@settings(max_examples=300, deadline=None)
@given(st.lists(maybe_bad_record, max_size=10), st.integers(1, 300))
def test_refusals_are_the_same_whole_or_in_chunks(records, size):
    try:
        bodies = layouts(records)
    except (TypeError, ValueError, OverflowError):  # orjson cannot write some of hypothesis' values
        bodies = [(json.dumps(records).encode(), "json")]
    for body, kind in bodies:
        assert outcome(body, kind, size) == outcome(body, kind)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.fixed_dictionaries({"id": text, "label": st.sampled_from([0, 1, 2, "x", None])},
                                      optional={"ts": st.integers(0, 9_000_000_000)}), max_size=12),
       st.integers(1, 200))
def test_labels_are_the_same_whole_or_in_chunks(records, size):
    for body, kind in layouts(records):
        assert outcome(body, kind, size, "labels") == outcome(body, kind, None, "labels")


def test_a_chunked_batch_keeps_floats_in_arrays_and_shares_equal_categories():
    batch = validator.predictions(parsing.ChunkedBody(orjson.dumps(predictions(40)), "json", None, 100))
    assert isinstance(batch.scores, array) and all(isinstance(c, array) for c in batch.features[:2])
    region = batch.features[2]
    assert region[0] == region[2] == "eu" and region[0] is region[2]
    assert batch.scores[3] == 0.3 and type(batch.scores[3]) is float  # read as a list of floats is


def test_problems_in_many_chunks_are_counted_and_listed_by_their_index_in_the_batch():
    records = predictions(30)
    for i in (2, 11, 12, 25, 29):
        records[i]["score"] = 7
    records[20]["features"]["x1"] = "abc"
    whole = assert_same(orjson.dumps(records))
    assert whole[0] == "ValidationError" and whole[2].startswith("6 problem(s) in a batch of 30 prediction records")
    assert [e["index"] for e in whole[3]] == [2, 11, 12, 20, 25]  # the first five (max_errors) listed


def test_repeats_across_chunks_are_dropped_or_refused_as_when_whole():
    records = predictions(12) + [prediction(3), prediction(7)]
    whole = assert_same(orjson.dumps(records))
    assert whole["duplicates"] == 2 and whole["positions"] == list(range(12))
    records[-1] = prediction(7, score=0.99)
    whole = assert_same(orjson.dumps(records))
    assert whole[0] == "ValidationError" and [(e["index"], e["field"]) for e in whole[3]] == [(13, "id")]


@pytest.mark.parametrize("body", [
    b'[{"id": "a},{b", "features": {"x0": 1, "x1": 2, "region": "},{"}, "score": 0.5}, ' * 3 + b"{}]",
    orjson.dumps([{**prediction(0), "extra": [{"a": 1}, {"b": 2}]}, prediction(1)]),  # objects in a nested list
    orjson.dumps({"records": predictions(5), "x": 1, "y": [{}, {}]}),  # unknown top-level fields
    # A repeated key: the last one counts.
    b'{"records": ' + orjson.dumps(predictions(5)) + b', "records": ' + orjson.dumps(predictions(2, "s")) + b"}",
    b'{"records": ' + orjson.dumps(predictions(5)) + b', "records": 5}',
    b'{"x": 1, "records": ' + orjson.dumps(predictions(5)) + b"}",
    orjson.dumps({"records": 5}), orjson.dumps(predictions(5))[:-30],  # truncated
    orjson.dumps(predictions(5)).replace(b"},{", b"}\x0c,{"),  # not JSON whitespace
    orjson.dumps(predictions(5)) + b" ]", orjson.dumps(predictions(5)) + b"x",
    b"\xef\xbb\xbf" + orjson.dumps(predictions(2)),  # a byte-order mark
    b"[" + b" " * 300 + b"]", b"  \n ", b"[]", b"[1, 2, 3]", b"[[1], [2]]", b'[{"id": NaN}]',
], ids=lambda b: b[:24].decode("latin-1"))
def test_bodies_that_cannot_be_cut_answer_as_before(body):
    assert_same(body)


def test_too_many_records_is_413_once_counted_and_malformed_json_still_400_first():
    body = orjson.dumps(predictions(30))
    whole = assert_same(body, max_records=20)
    assert whole[:2] == ("BodyError", 413) and "the batch has 30 records; the limit is 20" in whole[2]
    whole = assert_same(body[:-5], max_records=20)
    assert whole[:2] == ("BodyError", 400)
    whole = assert_same(orjson.dumps({"records": predictions(30), "x": 1}), max_records=20)
    assert whole[:2] == ("ValidationError", None) and whole[3][0]["field"] == "x"  # 422 before 413, as ever


def test_ndjson_errors_name_the_line_of_the_body():
    lines = [orjson.dumps(r) for r in predictions(12)]
    lines[9] = b'{"id": oops}'
    body = b"\n".join(lines[:4] + [b"", b"   "] + lines[4:])
    whole = assert_same(body, "ndjson")
    assert whole[:2] == ("BodyError", 400) and "line 12" in whole[2]
    assert assert_same(b"\n".join(lines[:3]) + b"\n\n", "ndjson")["ids"] == ["r0", "r1", "r2"]
    whole = assert_same(b"\n".join(lines[:3] * 10), "ndjson", max_records=20)
    assert whole[:2] == ("BodyError", 413)


def test_aliases_and_repeats_are_read_again_with_their_names():
    model = small_model().model_copy(update={"score": "proba"})
    aliased = RecordValidator(model, clock=lambda: NOW)
    records = [{**{k: v for k, v in prediction(i % 4).items() if k != "score"}, "proba": 0.25} for i in range(9)]
    body = orjson.dumps(records)
    whole = _plain(aliased.predictions(orjson.loads(body)))
    assert _plain(aliased.predictions(parsing.ChunkedBody(body, "json", None, 30))) == whole
    assert whole["duplicates"] == 5


def test_a_chunked_body_is_record_chunks_and_reads_records_again_by_index():
    chunks = parsing.ChunkedBody(orjson.dumps(predictions(20)), "json", None, 50)
    assert isinstance(chunks, RecordChunks)
    sizes = [len(c) for c in chunks]
    assert len(sizes) > 3 and sum(sizes) == chunks.count == 20
    assert chunks.records_at([0, 13, 19]) == {0: prediction(0), 13: prediction(13), 19: prediction(19)}
