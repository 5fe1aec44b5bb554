"""The client's errors, below both the ingest client (:mod:`monitor.client`) and :class:`Champion`
(:mod:`monitor.champion_client`), which raise them; import them from :mod:`monitor.client`.

All are :class:`monitor.errors.DriftloopError`::

    ClientError
    ├── RequestRejected      4xx: bad records (422), conflicting re-send (409), auth (401), size (413)
    └── ServerUnavailable    retries exhausted on connection errors / 5xx
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from monitor.errors import DriftloopError

if TYPE_CHECKING:
    from monitor.client import IngestSummary


class ClientError(DriftloopError):
    pass


class RequestRejected(ClientError):
    """The server refused a batch (4xx). ``errors`` are ``{"index", "field", "message"}`` with
    ``index`` counted from the start of the data passed in; ``stored`` says what earlier batches stored."""

    def __init__(self, message: str, status_code: int, errors: list[dict], stored: "IngestSummary"):
        super().__init__(message)
        self.status_code = status_code
        self.errors = errors
        self.stored = stored


class ServerUnavailable(ClientError):
    def __init__(self, message: str, stored: "IngestSummary"):
        super().__init__(message)
        self.stored = stored
