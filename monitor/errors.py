"""driftloop's exception hierarchy. Third-party errors are translated once, at the boundary
where they occur, with ``raise OurError(...) from exc``.

    DriftloopError
    ├── ConfigError          invalid configuration (file, environment, flags)
    ├── UserInputError       a CLI argument or file the user gave is wrong
    │   └── MissingColumn    (monitor.records.frames) a DataFrame lacks a column the model needs
    ├── ValidationError      an ingested record/batch does not match the model schema (HTTP 4xx)
    │   └── ConflictError    a re-sent id carries different content than what is stored (HTTP 409)
    ├── FieldError           one field of one record is wrong (also a ValueError; the validator's slow path)
    ├── RequestError         an HTTP request that cannot be served as sent; ``status`` is its 4xx
    │   ├── BodyError        (monitor.ingest.parsing) an ingestion body: media type, size, JSON
    │   └── BadRequest       (monitor.daemon.runtime.api) a daemon endpoint's body
    ├── StoreError           the store cannot be reached or a query failed
    ├── DataError            training/evaluation data is unusable (empty, one class, NaNs, columns)
    ├── RegistryError        MLflow is unreachable or the registry is not in the expected state
    │   └── NoChampionError  (monitor.daemon.retraining.champion) no version holds the champion alias
    ├── ExportError          a model could not be exported to ONNX / quantized (recorded, never fatal)
    ├── UnavailableError     a part this request needs is not available here now (HTTP 503)
    │   └── NotLeaderError   (monitor.daemon.runtime.leader) this replica does not hold the lease
    ├── BusyError            (monitor.daemon.state.attempts) a retrain is already running (single flight)
    ├── TransitionError      (monitor.daemon.state.incidents) an incident cannot move that way, or is unknown
    ├── ClientError          (monitor.client) the ingestion API refused or could not be reached
    └── GpuBackendError      NVML failed; ``gpu`` says which GPU when one is known
        └── NvmlUnavailableError, GpuLostError   (monitor.gpu.backend)

Classes named with a module live there, next to their only raiser, and derive from this tree;
tests/monitor/test_errors.py checks that every exception class in monitor/ and trainer/ does.
"""
from __future__ import annotations

from enum import Enum


class Outage(str, Enum):
    """What is wrong with a dependency (the store, MLflow), as a caller without the bearer token
    may be told it: a kind, never the message (which names paths, mount points, URLs and
    exception texts, for the log and authenticated callers)."""
    LOCKED = "locked"            # another writer holds the lock beyond the busy timeout
    DISK_FULL = "disk_full"      # less than store.min_free_bytes free
    READ_ONLY = "read_only"      # read-only filesystem, file or database (a standby)
    UNREACHABLE = "unreachable"  # cannot be reached, or failed in another way
    NO_ANSWER = "no_answer"      # the check did not answer in time
    BUSY = "busy"                # the daemon's controller is held by other work


class DriftloopError(Exception):
    """Base of all errors driftloop raises on purpose. The CLI prints these as ``Error: ...``.
    ``kind`` (an :class:`Outage`, or None) is what an unauthenticated HTTP caller is told of a
    dependency's failure instead of the message."""

    kind: Outage | None = None

    def __init__(self, *args: object, kind: Outage | None = None):
        super().__init__(*args)
        if kind is not None:
            self.kind = kind


class ConfigError(DriftloopError):
    pass


class UserInputError(DriftloopError):
    pass


class ValidationError(DriftloopError):
    """A batch failed validation. ``errors`` lists ``{"index", "field", "message"}`` dicts."""

    def __init__(self, message: str, errors: list[dict] | None = None):
        super().__init__(message)
        self.errors = errors or []


class ConflictError(ValidationError):
    pass


class FieldError(DriftloopError, ValueError):
    pass


class RequestError(DriftloopError):
    """``status``: the HTTP status to answer (4xx); ``errors``: ``{"field", "message"}`` dicts, if any."""

    def __init__(self, status: int, message: str, errors: list[dict] | None = None):
        super().__init__(message)
        self.status = status
        self.errors = errors


class StoreError(DriftloopError):
    pass


class DataError(DriftloopError):
    pass


class RegistryError(DriftloopError):
    pass


class ExportError(DriftloopError):
    pass


class UnavailableError(DriftloopError):
    pass


class GpuBackendError(DriftloopError):
    def __init__(self, message: str, gpu: int | None = None):
        super().__init__(message)
        self.gpu = gpu
