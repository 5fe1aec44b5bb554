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


def decode(body: bytes, content_encoding: str | None, max_bytes: int) -> bytes:
    encoding = (content_encoding or "identity").strip().lower()
    if encoding == "identity":
        return body
    if encoding not in ("gzip", "x-gzip"):
        raise BodyError(415, "malformed", f"Content-Encoding {encoding!r} is not supported (use gzip or none)")
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
            raise BodyError(413, "too_large", f"the decompressed body exceeds {max_bytes} bytes (server.max_body_bytes)")
        out.append(chunk)
        if not inflater.eof:
            raise BodyError(400, "malformed", "the gzip stream is incomplete (truncated body): nothing stored; "
                                              "send the whole batch again")
        rest = inflater.unused_data
        if not rest:
            return b"".join(out)
        if not rest.startswith(b"\x1f\x8b"):  # another gzip member may follow (RFC 1952); anything else is junk
            raise BodyError(400, "malformed", f"{len(rest)} bytes of trailing data after the gzip stream: nothing stored")


def parse_records(body: bytes, kind: str) -> list:
    if kind == "ndjson":
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
            raise ValidationError("unknown top-level field", [
                {"index": None, "field": k, "message": "unknown top-level field (only 'records' is allowed)"} for k in extra])
        if isinstance(data["records"], list):
            return data["records"]
        data = data["records"]
    raise ValidationError("expected a list of records", [{"index": None, "field": "(body)",
        "message": f"expected a JSON list of records or {{\"records\": [...]}}, got {describe(data)}"}])


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
