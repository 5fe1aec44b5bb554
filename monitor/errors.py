"""driftloop's exception hierarchy. Third-party errors are translated once, at the boundary
where they occur, with ``raise OurError(...) from exc``.

    DriftloopError
    ├── ConfigError          invalid configuration (file, environment, flags)
    ├── UserInputError       a CLI argument or file the user gave is wrong
    ├── ValidationError      an ingested record/batch does not match the model schema (HTTP 4xx)
    │   └── ConflictError    a re-sent id carries different content than what is stored (HTTP 409)
    ├── StoreError           the store cannot be reached or a query failed
    ├── DataError            training/evaluation data is unusable (empty, one class, NaNs, columns)
    ├── RegistryError        MLflow is unreachable or the registry is not in the expected state
    ├── ExportError          a model could not be exported to ONNX / quantized (recorded, never fatal)
    ├── UnavailableError     a part this request needs is not available here now (HTTP 503)
    └── GpuBackendError      NVML failed; ``gpu`` says which GPU when one is known
"""
from __future__ import annotations


class DriftloopError(Exception):
    """Base of all errors driftloop raises on purpose. The CLI prints these as ``Error: ...``."""


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
