"""What NVML's return codes (``nvml.h``) mean for us, and the hints an error message carries.

:class:`monitor.gpu.nvml.NvmlBackend` translates errors by these sets (its module docstring says
into what); the reading modules beside it use them to tell an empty slot or a timeout from a failure.
No ``pynvml`` import here: the codes are plain integers.
"""
from __future__ import annotations

from typing import Any

UNAVAILABLE = {1, 9, 12, 17, 18}        # uninitialized, driver not loaded, no library, OS blocked, RM mismatch
LOST = {15, 16, 28, 999}                # GPU is lost, reset required, GPU not found, unknown
ABSENT = {3}                            # not supported
MISSING_FUNCTION = 13                   # function not found: the driver is older than the binding
TRANSIENT = {21, 27}                    # no data yet, not ready: absent this time, no error
TIMEOUT = 10
NOT_FOUND = 6

HINTS = {
    12: "libnvidia-ml.so.1 not found: is the NVIDIA driver installed and visible in this container?",
    9: "the NVIDIA kernel driver is not loaded",
    18: "the NVML library and the kernel driver versions differ: reboot or reload the driver",
}


def code_of(nv: Any, exc: BaseException) -> int | None:
    """The NVML return code of ``exc`` (None when it is not an ``NVMLError`` of the ``nv`` module)."""
    return getattr(exc, "value", None) if isinstance(exc, nv.NVMLError) else None


def message(exc: BaseException, call: str, code: int | None, index: int | None = None) -> str:
    """``GPU 0: nvmlInit: <NVML's words> (<our hint>)``: what failed, where, and what to check."""
    where = f"GPU {index}: " if index is not None else ""
    hint = HINTS.get(code) if code is not None else None
    return f"{where}{call}: {exc}" + (f" ({hint})" if hint else "")


def text(value: Any) -> str:
    """NVML strings arrive as bytes from older bindings, str from newer ones."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
