"""Request bodies to lists of records: JSON (a list, or ``{"records": [...]}``) or NDJSON (one record
per line), optionally gzip-compressed. Problems become :class:`BodyError` with the HTTP status and
the metric reason to answer with; a well-formed body of the wrong shape is a validation error (422).
"""
from __future__ import annotations

import zlib

import orjson

from monitor.errors import RequestError, ValidationError
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


def parse_records(body: bytes, kind: str, max_records: int | None = None) -> list:
    """The records of ``body`` (``kind``: ``"json"`` or ``"ndjson"``); more than ``max_records``
    lines of NDJSON are refused (413) before they are parsed."""
    check_containers(body)
    if kind == "ndjson":
        if max_records is not None and body.count(b"\n") >= max_records:
            lines = sum(1 for line in body.split(b"\n") if line.strip())
            if lines > max_records:
                raise BodyError(413, "too_large", f"the batch has {lines} records; the limit is {max_records} "
                                                  "(server.max_batch_records): split it")
        return _ndjson(body)
    if not body.strip():
        raise BodyError(400, "malformed", "empty body: send a JSON list of records")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BodyError(400, "malformed", f"malformed JSON: {exc}") from None
    if isinstance(data, list):
        return data
    if isinstance(data, dict) and "records" in data:
        extra = sorted(set(data) - {"records"})
        if extra:
            del data  # the traceback keeps this frame: the parsed batch must not live on with it
            raise ValidationError("unknown top-level field", [
                {"index": None, "field": k,
                 "message": "unknown top-level field (only 'records' is allowed)"} for k in extra])
        if isinstance(data["records"], list):
            return data["records"]
        data = data["records"]
    shown = describe(data)
    del data
    raise ValidationError("expected a list of records", [{"index": None, "field": "(body)",
        "message": f"expected a JSON list of records or {{\"records\": [...]}}, got {shown}"}])


def _ndjson(body: bytes) -> list:
    if not body.strip():
        raise BodyError(400, "malformed", "empty body: send one JSON record per line (application/x-ndjson)")
    records = []
    for number, line in enumerate(body.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            records.append(orjson.loads(line))
        except orjson.JSONDecodeError as exc:
            raise BodyError(400, "malformed", f"malformed JSON on line {number}: {exc}") from None
    return records
