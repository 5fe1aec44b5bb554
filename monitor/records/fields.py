"""Checks for single values of an ingested record. Each returns the normalised value or raises
:class:`FieldError` with a message that says what was expected and what came instead.

These are the slow, precise path: :mod:`monitor.records.validation` checks whole columns at once and
only comes here, record by record, to explain what is wrong.
"""
from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone
from typing import Any, cast

from monitor.errors import FieldError  # noqa: F401  (the precise path's error, importable from here too)
from monitor.finite import FLOAT32_MAX

MAX_ID_LENGTH = 200
# The latest accepted time, 2262-04-11T00:00:00Z, in epoch seconds (exclusive): a little under
# pandas' last timestamp (pd.Timestamp.max, 2262-04-11T23:47:16.854775807Z). Every window is read
# into nanosecond timestamps (monitor.store.window), where a later time cannot be represented.
MAX_EPOCH_SECONDS = 9_223_286_400
MAX_TS_TEXT = "2262-04-11T00:00:00Z"
TS_RANGE = f"a time between 1970-01-01T00:00:00Z and {MAX_TS_TEXT} (exclusive)"
# Epoch seconds from this on (year 2286) are almost certainly milliseconds or nanoseconds.
LIKELY_MILLISECONDS = 10_000_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_US = timedelta(microseconds=1)
_MAX_US = MAX_EPOCH_SECONDS * 1_000_000


def describe(value: object) -> str:
    """A short, JSON-flavoured rendering of a bad value for an error message."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_text(value: object, what: str = "a string") -> str:
    if type(value) is not str:
        raise FieldError(f"expected {what}, got {describe(value)}")
    if "\x00" in value:
        raise FieldError(f"expected {what} without NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise FieldError(f"expected {what} of valid Unicode (lone surrogate)") from None
    return value


def check_id(value: object) -> str:
    what = f"a string of 1-{MAX_ID_LENGTH} characters"
    text = check_text(value, what)
    if not 1 <= len(text) <= MAX_ID_LENGTH:
        raise FieldError(f"expected {what}, got a string of {len(text)} characters")
    return text


MAX_VERSION_LENGTH = 64


def check_model_version(value: object) -> str:
    """The registry version that scored a prediction: text of 1-64 characters (``"7"``), or a
    non-negative integer (``7``), stored as text."""
    what = f"a model version: a string of 1-{MAX_VERSION_LENGTH} characters or a non-negative integer"
    if type(value) is int:
        if value < 0:
            raise FieldError(f"expected {what}, got {describe(value)}")
        return str(value)
    text = check_text(value, what)
    if not 1 <= len(text) <= MAX_VERSION_LENGTH:
        raise FieldError(f"expected {what}, got a string of {len(text)} characters")
    return text


def check_number(value: object, limit: float = FLOAT32_MAX) -> float:
    """A finite number of magnitude at most ``limit`` (``model.max_abs_value``): a larger one, stored,
    would sit in every check's window (:mod:`monitor.drift.bounded`)."""
    # bool is an int subclass in Python: a score, a label or a predicted value of `true` is a
    # client's bug, refused (a numeric *feature* takes booleans: check_feature_number).
    if type(value) not in (int, float):
        raise FieldError(f"expected a finite number, got {describe(value)}")
    try:
        out = float(cast(float, value))  # an int or a float, checked above
    except OverflowError:
        raise FieldError(f"expected a finite number, got {describe(value)}") from None
    if not math.isfinite(out):
        raise FieldError(f"expected a finite number, got {describe(value)}")
    if abs(out) > limit:
        raise FieldError(f"expected a number between -{limit:.6g} and {limit:.6g} (model.max_abs_value), "
                         f"got {describe(value)}")
    return out


def check_feature_number(value: object, limit: float = FLOAT32_MAX) -> float:
    """A numeric feature's value: a finite number, or a JSON ``true``/``false`` as 1.0/0.0. A column
    of booleans in the user's data is a numeric 0/1 feature (``driftloop init`` infers it so), and a
    service serialising that column's values sends booleans; the fast column-wise path in
    :mod:`monitor.records.validation` and the client's frames (:mod:`monitor.records.frames`) apply
    the same rule."""
    if type(value) is bool:
        return 1.0 if value else 0.0
    return check_number(value, limit)


def check_score(value: object) -> float:
    try:
        out = check_number(value)
    except FieldError:
        raise FieldError(f"expected a finite number in [0, 1], got {describe(value)}") from None
    if not 0.0 <= out <= 1.0:
        raise FieldError(f"expected a finite number in [0, 1], got {describe(value)}")
    return out


def check_binary(value: object) -> int:
    if type(value) is not int or value not in (0, 1):
        raise FieldError(f"expected 0 or 1, got {describe(value)}")
    return value


_RFC3339 = re.compile(r"(\d{4}-\d\d-\d\d)[Tt ](\d\d:\d\d):(\d\d)(\.\d+)?([Zz]|[+-]\d\d:\d\d)")


def _rfc3339(value: str) -> tuple[str, int]:
    """``value`` as Python's ISO reader takes it, and the microseconds to add: RFC 3339 allows a
    lower-case ``t`` and ``z`` (section 5.6) and a leap second (``23:59:60``, read as the next
    second, as POSIX clocks count it). Other ISO 8601 forms with an offset pass through unchanged."""
    m = _RFC3339.fullmatch(value)
    if m is None:
        return value, 0
    date, minutes, seconds, fraction, offset = m.groups()
    leap = seconds == "60"
    text = (f"{date}T{minutes}:{'59' if leap else seconds}{fraction or ''}"
            f"{'+00:00' if offset in ('Z', 'z') else offset}")
    return text, (1_000_000 if leap else 0)


def check_ts(value: object) -> int:
    """RFC 3339 text with an offset, or epoch seconds -> microseconds since the epoch (UTC)."""
    expected = "an RFC 3339 timestamp with a UTC offset (e.g. 2026-11-30T01:02:03Z) or epoch seconds"
    if type(value) is str:
        leap = 0
        # Python's ISO reader takes more than RFC 3339: week dates (2026-W48-1), ordinal dates
        # (2026-330), the basic form (20261130T...), a comma before the fraction. Two cheap looks.
        if value[4:5] != "-" or value[7:8] != "-" or "," in value:
            raise FieldError(f"expected {expected}, got {describe(value)}")
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:  # RFC 3339's own forms Python's reader does not take (rare: off the fast path)
            text, leap = _rfc3339(value)
            try:
                parsed = datetime.fromisoformat(text)
            except ValueError:
                raise FieldError(f"expected {expected}, got {describe(value)}") from None
        if parsed.tzinfo is None:
            raise FieldError(f"expected {expected}, got {describe(value)} (no UTC offset)")
        us = (parsed - _EPOCH) // _ONE_US + leap
    elif type(value) in (int, float):
        value = cast(float, value)  # exactly int or float (not bool), checked above
        if not math.isfinite(value):
            raise FieldError(f"expected {expected}, got {describe(value)}")
        if value >= LIKELY_MILLISECONDS:
            raise FieldError(f"expected epoch seconds, got {describe(value)} (milliseconds? divide by 1000)")
        if not 0 <= value < MAX_EPOCH_SECONDS:  # checked before scaling: a huge negative number would overflow
            raise FieldError(f"expected {TS_RANGE}, got {describe(value)}")
        us = round(value * 1_000_000)
    else:
        raise FieldError(f"expected {expected}, got {describe(value)}")
    if not 0 <= us < _MAX_US:
        raise FieldError(f"expected {TS_RANGE}, got {describe(value)}")
    return us


def iso_us(us: int) -> str:
    """Microseconds since the epoch as RFC 3339 text, to the second (for messages)."""
    return (_EPOCH + timedelta(microseconds=us)).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_embedding(value: object, dim: int) -> bytes:
    """An embedding vector: a list of exactly ``dim`` finite numbers (JSON ints or floats) that fit
    float32 -> its stored form, ``dim`` little-endian float32 (:func:`monitor.embeddings.to_blob`).
    The vectorised check of a whole column is in :mod:`monitor.records.embedded`."""
    what = f"a list of {dim} numbers"
    if type(value).__name__ == "ndarray":  # Python callers: a 1-D numpy array of numbers is a list
        array: Any = value
        if array.ndim != 1 or array.dtype.kind not in "fiu":
            raise FieldError(f"expected {what}, got an array of shape {array.shape} and dtype {array.dtype}")
        value = array.tolist()
    if type(value) is not list:
        raise FieldError(f"expected {what}, got {describe(value)}")
    if len(value) != dim:
        raise FieldError(f"expected {what}, got {len(value)}")
    for k, v in enumerate(value):
        if type(v) not in (int, float):
            raise FieldError(f"expected {what}, got {describe(v)} at position {k}")
    import numpy as np  # here, not at the top: the tabular precise path needs no numpy

    with np.errstate(over="ignore"):
        vec = np.array(value, dtype=np.float64).astype("<f4")
    bad = ~np.isfinite(vec)
    if bad.any():
        k = int(np.argmax(bad))
        raise FieldError(f"expected {what}, each finite and within float32's range (±3.4e38), got "
                         f"{describe(value[k])} at position {k}")
    return vec.tobytes()


def check_input_uri(value: object) -> str:
    """A raw-input reference (a path or object-store key): text of 1-MAX_INPUT_URI_CHARS characters."""
    from monitor.embeddings import MAX_INPUT_URI_CHARS

    what = f"a path or URI: a string of 1-{MAX_INPUT_URI_CHARS} characters"
    text = check_text(value, what)
    if not 1 <= len(text) <= MAX_INPUT_URI_CHARS:
        raise FieldError(f"expected {what}, got a string of {len(text)} characters")
    return text
