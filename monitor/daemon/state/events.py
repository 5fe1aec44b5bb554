"""What an incident event row (and a retrain attempt's error) may hold: a message of at most
:data:`MAX_EVENT_MESSAGE_CHARS` characters and data of at most :data:`MAX_EVENT_DATA_BYTES` of JSON,
whatever the event is about. Every writer of ``incident_events`` goes through :func:`event_message`
and :func:`event_data` (``incidents.py``), so no kind of event can grow a row past them.
"""
from __future__ import annotations

import json
from typing import Any

# An event row stays small whatever it is about (an Alertmanager delivery's labels, a retrain's error,
# a note): its message at most MAX_EVENT_MESSAGE_CHARS characters (an incident's detail too), its data
# at most MAX_EVENT_DATA_BYTES of JSON. Bigger data is shrunk step by step (strings, lists, keys cut,
# "truncated": true), else replaced by its size. A delivery of 20 alerts with 64 labels of 1,024
# characters wrote a 1.24 MB row before (issue 35).
MAX_EVENT_MESSAGE_CHARS = 4096
MAX_EVENT_DATA_BYTES = 16 * 1024
_SHRINK_STEPS = ((300, 10, 32), (100, 10, 16), (40, 5, 8))  # string characters, list items, dict keys


def event_message(text: str) -> str:
    """``text`` within :data:`MAX_EVENT_MESSAGE_CHARS`."""
    return text if len(text) <= MAX_EVENT_MESSAGE_CHARS else text[:MAX_EVENT_MESSAGE_CHARS - 1] + "…"


def event_data(data: Any) -> str | None:
    """``data`` as an event row's JSON, within :data:`MAX_EVENT_DATA_BYTES` (see there)."""
    if data is None:
        return None
    text = json.dumps(data, default=str)
    if len(text.encode()) <= MAX_EVENT_DATA_BYTES:
        return text
    full = json.loads(text)
    for chars, items, keys in _SHRINK_STEPS:
        small = _shrink(full, chars, items, keys)
        small = {**small, "truncated": True} if isinstance(small, dict) else {"data": small, "truncated": True}
        shrunk = json.dumps(small)
        if len(shrunk.encode()) <= MAX_EVENT_DATA_BYTES:
            return shrunk
    return json.dumps({"truncated": True, "omitted_bytes": len(text.encode())})


def _shrink(value: Any, chars: int, items: int, keys: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= chars else value[:chars - 1] + "…"
    if isinstance(value, list):
        kept = [_shrink(v, chars, items, keys) for v in value[:items]]
        return kept + ([f"… {len(value) - items} more"] if len(value) > items else [])
    if isinstance(value, dict):
        pairs = list(value.items())
        kept_pairs = {_shrink(k, chars, items, keys): _shrink(v, chars, items, keys) for k, v in pairs[:keys]}
        if len(pairs) > keys:
            kept_pairs["…"] = f"{len(pairs) - keys} more"
        return kept_pairs
    return value
