"""XID errors as NVML events: one event set, the GPUs registered on it, and the wait that drains it.

Used by :class:`monitor.gpu.nvml.NvmlBackend`, which passes in the ``pynvml`` module and its
error translation (``translate(exc, call, index)``), so a failure here reads like any other.
"""
from __future__ import annotations

import ctypes
import logging
from typing import Any, Callable, Iterable

from monitor.gpu.backend import GpuBackendError, XidEvent
from monitor.gpu.nvml_codes import ABSENT, TIMEOUT, code_of

log = logging.getLogger("monitor.gpu.nvml")  # the backend's logger: its lines read as they always did

XID_EVENT = 0x8                         # nvmlEventTypeXidCriticalError

Translate = Callable[[BaseException, str, "int | None"], GpuBackendError]


class XidEvents:
    """The event set XID errors arrive on; ``watch`` (re)builds it, ``wait`` reads it."""

    def __init__(self, nv: Any, translate: Translate):
        self._nv = nv
        self._translate = translate
        self.events: Any = None
        self._gpus: dict[int, int] = {}  # handle address -> index

    def watch(self, handles: Iterable[tuple[int, Any]]) -> None:
        """Register each ``(index, handle)`` for XID events on a fresh event set."""
        nv = self._nv
        try:
            if self.events is not None:
                nv.nvmlEventSetFree(self.events)
                self.events = None
            events = nv.nvmlEventSetCreate()
        except nv.NVMLError as exc:
            raise self._translate(exc, "nvmlEventSetCreate", None) from exc
        gpus: dict[int, int] = {}
        for index, h in handles:
            try:
                nv.nvmlDeviceRegisterEvents(h, XID_EVENT, events)
            except nv.NVMLError as exc:
                if code_of(nv, exc) in ABSENT:
                    log.info("GPU %d does not report XID events", index)
                    continue
                raise self._translate(exc, "nvmlDeviceRegisterEvents", index) from exc
            gpus[_address(h)] = index
        self.events, self._gpus = events, gpus

    def wait(self, timeout_seconds: float) -> list[XidEvent]:
        """The XID events that arrive within ``timeout_seconds`` (at most 256), then what is queued."""
        nv = self._nv
        if self.events is None:
            raise GpuBackendError("XID events are not being watched")
        out: list[XidEvent] = []
        timeout_ms = max(0, int(timeout_seconds * 1000))
        while len(out) < 256:
            try:
                data = nv.nvmlEventSetWait_v2(self.events, timeout_ms)
            except nv.NVMLError as exc:
                if code_of(nv, exc) == TIMEOUT:
                    break
                raise self._translate(exc, "nvmlEventSetWait", None) from exc
            if data.eventType & XID_EVENT:
                out.append(XidEvent(self._gpus.get(_address(data.device), -1), int(data.eventData)))
            timeout_ms = 0  # drain what is already queued, then return
        return out

    def free(self) -> None:
        """Free the event set (before ``nvmlShutdown``); raises what NVML raises."""
        if self.events is not None:
            self._nv.nvmlEventSetFree(self.events)

    def forget(self) -> None:
        """NVML went away: the event set and its registrations went with it."""
        self.events = None
        self._gpus = {}


def _address(handle: Any) -> int:
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value or 0
    except (TypeError, ctypes.ArgumentError):
        return id(handle)
