"""Giving memory back after a burst of large request bodies.

Python frees a parsed batch as soon as the request is answered, but glibc's allocator keeps the
freed heap pages for reuse: after 48 parallel 31 MiB bodies the daemon held 6.6 GB it no longer
used. ``malloc_trim(0)`` returns those pages to the operating system. It costs a walk over the
heap (milliseconds), so :class:`monitor.ingest.security.RequestGate` calls :func:`release` once,
when the last request of a burst that carried a large body has been answered. On a C library
without ``malloc_trim`` (musl, macOS) it does nothing.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
from typing import Callable

# Bodies from this size on are followed by a release (smaller ones hardly move the heap).
LARGE_BODY_BYTES = 1024 * 1024


def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None)
    except OSError:
        return None


_TRIM = _malloc_trim()


def release() -> bool:
    """Collect cyclic garbage (a refused batch's exception, traceback and frames can hold its parsed
    records in a cycle) and hand free heap pages back to the OS; True where glibc could."""
    gc.collect()
    if _TRIM is None:
        return False
    _TRIM(0)
    return True
