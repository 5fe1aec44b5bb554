"""The client's errors, below both the ingest client (:mod:`monitor.client`) and :class:`Champion`
(:mod:`monitor.champion_client`), which raise them; import them from :mod:`monitor.client`.

All are :class:`monitor.errors.DriftloopError`::

    ClientError
    ├── RequestRejected      4xx: bad records (422), conflicting re-send (409), auth (401), size (413)
    ├── ServerUnavailable    retries exhausted on connection errors / 5xx
    ├── InvalidRecords       refused before sending: a value JSON cannot carry (also a ValueError)
    └── MissingExtra         a part whose dependency the light install left out (also an ImportError)
"""
from __future__ import annotations

import importlib
from types import ModuleType
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


class InvalidRecords(ClientError, ValueError):
    """Records the client refused before sending anything: a value JSON cannot carry, an infinity
    (orjson would write it as ``null``, a missing value, and the row would be stored altered).
    ``errors`` are ``{"index", "field", "message"}`` as the server's are; ``stored`` is empty."""

    def __init__(self, message: str, errors: list[dict], stored: "IngestSummary"):
        super().__init__(message)
        self.errors = errors
        self.stored = stored


class ServerUnavailable(ClientError):
    def __init__(self, message: str, stored: "IngestSummary"):
        super().__init__(message)
        self.stored = stored


class MissingExtra(ClientError, ImportError):
    """A part of the client was used whose dependency is not installed: ``driftloop-client``
    (scripts/build_client.py) brings onnxruntime only with ``[onnx]`` and MLflow only with
    ``[registry]``. ``module``: what is missing; ``extra``: the extra that installs it. An
    ImportError too, so ``except ImportError`` works."""

    def __init__(self, message: str, *, module: str, extra: str):
        super().__init__(message)
        self.module, self.extra = module, extra


def import_extra(module: str, extra: str) -> ModuleType:
    """``module``, imported; MissingExtra naming the ``driftloop-client`` extra that installs it
    when it is absent. A module that is there but fails to import raises as it does."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module.split(".")[0]:
            raise
        raise MissingExtra(f"{module} is not installed: pip install 'driftloop-client[{extra}]' "
                           f"(the full driftloop install has it)", module=module, extra=extra) from exc
