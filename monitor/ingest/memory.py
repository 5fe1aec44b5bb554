"""Giving memory back after a burst of large request bodies, and a garbage collector sized for batches.

Python frees a parsed batch as soon as the request is answered, but glibc's allocator keeps the
freed heap pages for reuse: after 48 parallel 31 MiB bodies the daemon held 6.6 GB it no longer
used. ``malloc_trim(0)`` returns those pages to the operating system. It costs a walk over the
heap (milliseconds), so :class:`monitor.ingest.security.RequestGate` calls :func:`release` once,
when the last request of a burst that carried a large body has been answered. On a C library
without ``malloc_trim`` (musl, macOS) it does nothing.

``malloc_trim`` does not reach everything: it hands back free pages inside each arena, but shrinks
only the main arena's top. Each worker thread allocates from an arena of its own, and glibc trims
a thread arena's top when a free leaves it above ``M_TRIM_THRESHOLD``, a threshold that glibc
raises (to twice the largest freed mmap, up to 64 MiB) once a large block has been freed: after
that, every worker kept up to 64 MiB it no longer used, and each burst found new workers to keep
more (+100 to +180 MiB held after each burst of 16 parallel 31 MiB bodies, +300 to +400 MiB with
48). :func:`tune_allocator` fixes both thresholds, which also stops glibc from moving them: blocks
of :data:`MMAP_THRESHOLD_BYTES` or more (bodies, long columns) are mapped on their own and
unmapped when freed, and an arena's top is trimmed past :data:`TRIM_THRESHOLD_BYTES`.

Its full garbage collection holds the GIL
while it walks every object the collector tracks: about 0.7 s once the check path (torch, MLflow,
Evidently) is imported, which is why ``driftloop serve`` freezes its startup heap and, after its
first check with a champion, the check path out of the collector's way
(:mod:`monitor.daemon.runtime.heap`; a collection then walks tens of thousands of objects, not
700,000).

A parsed 1,000-record batch holds about 2,000 dicts (a record and its features) and as many tuples
while it is validated and stored. With CPython's default first-generation threshold (700 container
objects), each batch set off three to four young collections, each walking every live record of
every batch in flight, plus one older collection every few batches: 10-25 % of the server's CPU
per batch under load (bench/bench_ingest.py). :func:`size_collector` raises that threshold so that
the batches in flight fit under it. Reference counting still frees every batch as soon as it is
answered; only cyclic garbage (rare here; a refused batch's traceback) waits longer, and
:func:`release` collects it after large bodies.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
from typing import Callable

# Bodies from this size on are followed by a release (smaller ones hardly move the heap).
LARGE_BODY_BYTES = 1024 * 1024
# Set in a request's ASGI scope by the handler that inflated a body of LARGE_BODY_BYTES or more:
# RequestGate, which saw only the gzip bytes, then gives memory back after the burst too.
LARGE_BODY_SCOPE = "driftloop.large_body"
# Container objects allocated (net) before a young collection: the records of several 1,000-record
# batches in flight (the default is 700).
GEN0_THRESHOLD = 50_000
# glibc's mallopt parameters (malloc.h) and the values tune_allocator fixes: blocks this large get
# a mapping of their own (a 1,000-record batch allocates none); an arena's free top is trimmed
# past this (at most this much is kept per arena, 16 arenas on two cores).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 1024 * 1024
TRIM_THRESHOLD_BYTES = 1024 * 1024


def _libc_function(name: str) -> Callable[..., int] | None:
    """``name`` from the C library, where it has one (glibc's malloc_trim, mallopt)."""
    library = ctypes.util.find_library("c")
    if library is None:
        return None
    try:
        return getattr(ctypes.CDLL(library), name, None)
    except OSError:
        return None


_TRIM = _libc_function("malloc_trim")
_MALLOPT = _libc_function("mallopt")


def release() -> bool:
    """Collect cyclic garbage (a refused batch's exception, traceback and frames can hold its parsed
    records in a cycle) and hand free heap pages back to the OS; True where glibc could."""
    gc.collect()
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


def size_collector(gen0: int = GEN0_THRESHOLD) -> tuple[int, int, int]:
    """Raise the garbage collector's first threshold to ``gen0`` (never lowers it; the older
    generations' thresholds are kept). Process-wide, once per server; returns the thresholds now."""
    first, second, third = gc.get_threshold()
    if 0 < first < gen0:  # 0: collection disabled by the embedding program; left so
        gc.set_threshold(gen0, second, third)
    return gc.get_threshold()


def tune_allocator(mmap_threshold: int = MMAP_THRESHOLD_BYTES, trim_threshold: int = TRIM_THRESHOLD_BYTES) -> bool:
    """Fix glibc's mmap and trim thresholds (see the module's docstring). Process-wide, once per
    server; True where the C library took both (glibc), False elsewhere (nothing changed)."""
    if _MALLOPT is None:
        return False
    mapped = _MALLOPT(M_MMAP_THRESHOLD, mmap_threshold)
    trimmed = _MALLOPT(M_TRIM_THRESHOLD, trim_threshold)
    return bool(mapped and trimmed)
