"""Request bodies to lists of records: JSON (a list, or ``{"records": [...]}``) or NDJSON (one record
per line), optionally gzip-compressed. Problems become :class:`BodyError` with the HTTP status and
the metric reason to answer with; a well-formed body of the wrong shape is a validation error (422).

A body of :data:`CHUNKED_BYTES` or more is read as :class:`ChunkedBody`: its records a chunk of
about :data:`CHUNK_BYTES` at a time, so that its parsed dicts never exist all at once (parsed
whole, a batch of typical records cost 8 times its JSON: the dicts, and orjson's document tree
while it builds them). :func:`parse_records` reads any body whole, as before.
"""
from __future__ import annotations

import re
import zlib
from typing import Any, Collection, Iterator

import orjson

from monitor.errors import DriftloopError, RequestError, ValidationError
from monitor.records.fields import describe

JSON_TYPES = frozenset({"application/json"})
NDJSON_TYPES = frozenset({"application/x-ndjson", "application/ndjson", "application/jsonl",
                          "application/x-jsonlines", "application/jsonlines"})


class BodyError(RequestError):
    def __init__(self, status: int, reason: str, message: str):
        super().__init__(status, message)
        self.reason = reason


def media_type(content_type: str | None) -> str:
    """``"ndjson"`` or ``"json"``; :class:`BodyError` 415 for anything else."""
    value = (content_type or "").split(";")[0].strip().lower()
    params = [p.strip().lower() for p in (content_type or "").split(";")[1:]]
    charset = next((p.split("=", 1)[1].strip('"') for p in params if p.startswith("charset=")), "utf-8")
    if charset.replace("_", "-") not in ("utf-8", "utf8"):
        raise BodyError(415, "malformed", f"charset {charset!r} is not supported; send UTF-8")
    if value in JSON_TYPES or (value.startswith("application/") and value.endswith("+json")):
        return "json"
    if value in NDJSON_TYPES:
        return "ndjson"
    shown = f"Content-Type {value!r}" if value else "no Content-Type"
    raise BodyError(415, "malformed", f"{shown}: send application/json (a list of records) "
                                      "or application/x-ndjson (one record per line)")


def check_encoding(content_encoding: str | None) -> str:
    """``"identity"`` or ``"gzip"``; :class:`BodyError` 415 for anything else."""
    encoding = (content_encoding or "identity").strip().lower()
    if encoding == "identity":
        return encoding
    if encoding not in ("gzip", "x-gzip"):
        raise BodyError(415, "malformed", f"Content-Encoding {encoding!r} is not supported (use gzip or none)")
    return "gzip"


def decode(body: bytes, content_encoding: str | None, max_bytes: int) -> bytes:
    """The body as sent, or inflated: never more than ``max_bytes`` of output is produced (a
    45 KB gzip bomb that would inflate to gigabytes stops at the limit with 413)."""
    if check_encoding(content_encoding) == "identity":
        return body
    return _gunzip(body, max_bytes)


def _gunzip(body: bytes, max_bytes: int) -> bytes:
    """Whole gzip members only: a stream cut short (a truncated upload would otherwise store the
    records before the cut) or followed by anything but another member is refused."""
    out: list[bytes] = []
    size = 0
    rest = body
    while True:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunk = inflater.decompress(rest, max_bytes + 1 - size)  # bounded: a small bomb cannot fill memory
        except zlib.error as exc:
            raise BodyError(400, "malformed", f"the body is not valid gzip: {exc}") from None
        size += len(chunk)
        if size > max_bytes or inflater.unconsumed_tail:
            raise BodyError(413, "too_large", f"request body too large: the decompressed body exceeds the limit of "
                                              f"{max_bytes} bytes (server.max_body_bytes); send smaller batches")
        out.append(chunk)
        del chunk
        if not inflater.eof:
            raise BodyError(400, "malformed", "the gzip stream is incomplete (truncated body): nothing stored; "
                                              "send the whole batch again")
        rest = inflater.unused_data
        if not rest:
            return out[0] if len(out) == 1 else b"".join(out)  # one member: no second copy
        if not rest.startswith(b"\x1f\x8b"):  # another gzip member may follow (RFC 1952); anything else is junk
            raise BodyError(400, "malformed", f"{len(rest)} bytes of trailing data after the gzip stream: nothing "
                                              "stored")


# Parsed JSON costs far more memory than its text: an object or list at least 56 bytes (plus the
# pointer holding it) for as few as 2 bytes (``{}``). Real records spend more than 12 bytes of text
# per object or list (an id, a score, feature names; an embedding's numbers), so a body with more is
# refused before it is parsed: what parsing may cost stays a small multiple of the body's size.
MIN_BYTES_PER_CONTAINER = 12
# Bodies this small are parsed whatever they hold.
CONTAINER_CHECK_BYTES = 64 * 1024


def check_containers(body: bytes) -> None:
    """:class:`BodyError` 413 for a body dense with objects and lists (``[{},{},...]``): its parsed
    form would be 30 times its size. Brackets inside strings are counted too: an over-estimate."""
    if len(body) < CONTAINER_CHECK_BYTES:
        return
    containers = body.count(b"{") + body.count(b"[")
    if containers * MIN_BYTES_PER_CONTAINER > len(body):
        raise BodyError(413, "too_large", f"the body holds {containers} JSON objects or lists in {len(body)} bytes "
                                          f"(at most one per {MIN_BYTES_PER_CONTAINER} bytes is parsed): "
                                          "not a batch of records")


def _non_json_number(body: bytes, exc: orjson.JSONDecodeError) -> str:
    """A hint when the parser stopped at ``NaN``, ``Infinity`` or ``-Infinity``: Python's
    ``json.dumps`` writes them by default, and JSON has no such numbers."""
    at = getattr(exc, "pos", None)
    if not isinstance(at, int):
        return ""
    tail = body[at:at + 9]
    if tail.startswith((b"NaN", b"Infinity", b"-Infinity")):
        return (" (NaN and Infinity are not JSON: send a missing value as null; from Python, "
                "json.dumps(..., allow_nan=False) finds them)")
    return ""


def parse_records(body: bytes, kind: str, max_records: int | None = None) -> list:
    """The records of ``body`` (``kind``: ``"json"`` or ``"ndjson"``); more than ``max_records``
    lines of NDJSON are refused (413) before they are parsed."""
    check_containers(body)
    if kind == "ndjson":
        _check_lines(body, max_records)
        return _ndjson(body)
    if _blank(body):
        raise BodyError(400, "malformed", "empty body: send a JSON list of records")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BodyError(400, "malformed", f"malformed JSON: {exc}{_non_json_number(body, exc)}") from None
    if isinstance(data, list):
        return data
    if isinstance(data, dict) and "records" in data:
        extra = sorted(set(data) - {"records"})
        if extra:
            del data  # the traceback keeps this frame: the parsed batch must not live on with it
            raise _unknown_top_level(extra)
        if isinstance(data["records"], list):
            return data["records"]
        data = data["records"]
    shown = describe(data)
    del data
    raise ValidationError("expected a list of records", [{"index": None, "field": "(body)",
        "message": f"expected a JSON list of records or {{\"records\": [...]}}, got {shown}"}])


def check_count(records: int, max_records: int | None) -> None:
    """:class:`BodyError` 413 for a batch of more than ``max_records`` records."""
    if max_records is not None and records > max_records:
        raise BodyError(413, "too_large", f"the batch has {records} records; the limit is {max_records} "
                                          "(server.max_batch_records): split it")


def _unknown_top_level(extra: list[str]) -> ValidationError:
    return ValidationError("unknown top-level field", [
        {"index": None, "field": k, "message": "unknown top-level field (only 'records' is allowed)"} for k in extra])


def _blank(body: bytes) -> bool:
    """``not body.strip()`` without copying a large body."""
    return _BLANK.fullmatch(body) is not None


def _check_lines(body: bytes, max_records: int | None) -> None:
    """More than ``max_records`` non-blank NDJSON lines: 413 before any is parsed."""
    if max_records is not None and body.count(b"\n") >= max_records:
        check_count(sum(1 for start, end in _line_chunks(body, CHUNK_BYTES)
                        for line in body[start:end].split(b"\n") if line.strip()), max_records)


def _ndjson(body: bytes) -> list:
    if _blank(body):
        raise BodyError(400, "malformed", "empty body: send one JSON record per line (application/x-ndjson)")
    return _ndjson_lines(body, 1)


def _ndjson_lines(text: bytes, first: int) -> list:
    """The records of ``text``'s lines, the first of which is line ``first`` of the body."""
    records = []
    for number, line in enumerate(text.split(b"\n"), start=first):
        if not line.strip():
            continue
        try:
            records.append(orjson.loads(line))
        except orjson.JSONDecodeError as exc:
            raise BodyError(400, "malformed", f"malformed JSON on line {number}: {exc}{_non_json_number(line, exc)}") \
                from None
    return records


# ---- large bodies, a chunk of records at a time ------------------------------------------------
# Bodies from this size on are read as ChunkedBody (smaller ones cost little whichever way).
CHUNKED_BYTES = 1024 * 1024
# JSON text per chunk: the chunk's dicts and orjson's tree for it, about 10 times this, are all
# that is parsed at once.
CHUNK_BYTES = 512 * 1024

_SPACE = rb"[ \t\n\r]*"  # JSON's whitespace (a bytes regex's \s would also take \f and \v)
_BLANK = re.compile(rb"[ \t\n\r\x0b\x0c]*")  # what bytes.strip() strips
# Where a batch's records begin: a list, or {"records": [ as its first key.
_HEAD = re.compile(_SPACE + rb"(\[|\{" + _SPACE + rb'"records"' + _SPACE + rb":" + _SPACE + rb"\[)" + _SPACE)
# Between two records: a cut here is checked by parsing both sides (see ChunkedBody).
_BETWEEN = re.compile(rb"\}" + _SPACE + rb"," + _SPACE + rb"\{")
_SPACES = frozenset(b" \t\n\r")


class Unsplittable(DriftloopError):
    """A body :class:`ChunkedBody` could not cut into records (a ``},{`` inside a string, objects in
    a nested list, malformed JSON, a repeated ``records`` key): parse it whole
    (:func:`parse_records`), which gives the answer and the words it always gave. Internal: never
    reaches a caller."""


class ChunkedBody:
    """The records of a large body, a list of about ``chunk_bytes`` of JSON at a time, in order
    (:class:`monitor.records.batches.RecordChunks`); ``count`` is how many were read so far.

    JSON is cut between records (``}, {``), and each piece parsed as a list of its own. A cut is
    sound exactly when both sides parse: a piece that starts at a record and parses whole ends at
    one, whatever its bytes (JSON is read the same way from any point outside a string), so the
    pieces together are the batch parsed whole. A piece that does not parse raises
    :class:`Unsplittable`, as does a body that is not a list or ``{"records": [...]}`` with
    ``records`` first: the caller parses those whole. NDJSON is cut between lines, which are parsed
    one by one as always (the same errors, the same line numbers).

    Iterating raises what :func:`parse_records` and :func:`check_count` would for the whole body,
    in the same order: malformed JSON (400, through :class:`Unsplittable`), an unknown top-level
    field (422), too many records (413, once all are counted; no chunk is handed out after the
    limit). A consumer should hold no error of its own until iteration ends."""

    def __init__(self, body: bytes, kind: str, max_records: int | None = None, chunk_bytes: int | None = None):
        check_containers(body)
        if kind == "ndjson":
            _check_lines(body, max_records)
        self._body = body
        self._kind = kind
        self._max = max_records
        self._chunk = CHUNK_BYTES if chunk_bytes is None else chunk_bytes
        # Each chunk handed out: (first index, records, start, end, suffix or first line number).
        self._spans: list[tuple[int, int, int, int, Any]] = []
        self._refused = False  # the body will be refused whatever its records: none is handed out
        self.count = 0

    def __iter__(self) -> Iterator[list]:
        self.count = 0
        self._spans.clear()
        pieces = self._ndjson() if self._kind == "ndjson" else self._json()
        for start, end, extra in pieces:
            records = self._load(start, end, extra)
            first, self.count = self.count, self.count + len(records)
            if self._refused or (self._max is not None and self.count > self._max):
                continue  # read on for malformed JSON (400 first), then refused below
            self._spans.append((first, len(records), start, end, extra))
            yield records
            del records  # not alive while the next chunk is parsed
        check_count(self.count, self._max)

    def records_at(self, indices: Collection[int]) -> dict[int, Any]:
        """The records at ``indices``, parsed again from the chunks that hold them."""
        wanted = set(indices)
        found: dict[int, Any] = {}
        for first, n, start, end, extra in self._spans:
            if any(first <= i < first + n for i in wanted):
                records = self._load(start, end, extra)
                found.update((i, records[i - first]) for i in wanted if first <= i < first + n)
        return found

    def _load(self, start: int, end: int, extra: Any) -> list:
        if self._kind == "ndjson":
            return _ndjson_lines(self._body[start:end], extra)
        try:
            records = orjson.loads(b"".join((b"[", memoryview(self._body)[start:end], extra)))
        except orjson.JSONDecodeError:
            raise Unsplittable() from None
        return records

    def _ndjson(self) -> Iterator[tuple[int, int, int]]:
        if _blank(self._body):
            raise BodyError(400, "malformed", "empty body: send one JSON record per line (application/x-ndjson)")
        number = 1
        for start, end in _line_chunks(self._body, self._chunk):
            yield start, end, number
            number += self._body.count(b"\n", start, end) + 1

    def _json(self) -> Iterator[tuple[int, int, bytes]]:
        """(start, end, suffix) of each piece: ``b"[" + body[start:end] + suffix`` is a list of records."""
        body = self._body
        head = _HEAD.match(body)
        if head is None:
            raise Unsplittable()
        in_object = head.group(1) != b"["
        close = _closing_bracket(body, in_object)
        if close is None and not in_object:
            raise Unsplittable()  # a list that does not end with "]": malformed
        # Records followed by other keys: 422 naming them, or parsed whole (a repeated "records");
        # never validated, as they were not when parsed whole (only read on for malformed JSON).
        self._refused = close is None
        start = head.end()
        while True:
            cut = _BETWEEN.search(body, start + self._chunk, len(body) if close is None else close)
            if cut is None:
                break
            yield start, cut.start() + 1, b"]"
            start = cut.end() - 1
        if close is not None:
            yield start, close + 1, b""
            return
        self._refuse_top_level(start)

    def _refuse_top_level(self, start: int) -> None:
        """The records are followed by other keys (``{"records": [...], "x": 1}``): 422 naming them,
        as the whole body parsed would be; :class:`Unsplittable` for anything else."""
        try:
            data = orjson.loads(b"".join((b'{"records":[', memoryview(self._body)[start:])))
        except orjson.JSONDecodeError:
            raise Unsplittable() from None
        extra = sorted(set(data) - {"records"})
        del data
        if extra:
            raise _unknown_top_level(extra)
        raise Unsplittable()


def _closing_bracket(body: bytes, in_object: bool) -> int | None:
    """The index of the ``]`` that closes the records: the body's last byte, or for
    ``{"records": [...]}`` its last but one (but for whitespace); None when not there."""
    end = _last_non_space(body, len(body))
    if in_object:
        if end < 0 or body[end] != ord("}"):
            return None
        end = _last_non_space(body, end)
    return end if end >= 0 and body[end] == ord("]") else None


def _last_non_space(body: bytes, before: int) -> int:
    i = before - 1
    while i >= 0 and body[i] in _SPACES:
        i -= 1
    return i


def _line_chunks(body: bytes, size: int) -> Iterator[tuple[int, int]]:
    """(start, end) of pieces of ``body`` of about ``size`` bytes, cut at newlines (dropped)."""
    start = 0
    while start < len(body):
        end = body.find(b"\n", start + size)
        if end < 0:
            end = len(body)
        yield start, end
        start = end + 1
