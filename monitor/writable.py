"""Can a SQLite file take a write now? One probe for the store's file and MLflow's, so that both
answer a read-only disk, a full disk or a lock held too long the same way (bottom layer: the
store and the trainer's registry check both use it).
"""
from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from monitor.errors import Outage


@dataclass(frozen=True)
class WriteProblem:
    """Why a file cannot take writes: ``kind`` for anyone, ``message`` (naming the path) for the
    log and authenticated callers. Formats as its message."""
    kind: Outage
    message: str

    def __str__(self) -> str:
        return self.message


def probe_sqlite_writes(path: Path, timeout: float) -> None:
    """Raise :class:`sqlite3.Error` unless the SQLite file at ``path`` can take a write now:
    ``BEGIN IMMEDIATE`` takes the write lock (waiting up to ``timeout``) and fails on a read-only
    file or filesystem; nothing is written. Opens its own connection, so it also works on files
    that are not ours (MLflow's)."""
    conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=timeout, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
    finally:
        conn.close()


def space_problem(folder: Path, min_free_bytes: int = 0) -> WriteProblem | None:
    """Why the filesystem of ``folder`` cannot take writes (read-only, or less than ``min_free_bytes``
    free), or None. One ``statvfs``: cheap enough for ingestion to ask before each batch."""
    try:
        fs = os.statvfs(folder)
    except OSError as exc:
        return WriteProblem(Outage.UNREACHABLE, f"cannot inspect {folder}: {exc.strerror or exc}")
    if fs.f_flag & os.ST_RDONLY:
        return WriteProblem(Outage.READ_ONLY, f"{folder} is on a read-only filesystem")
    free = fs.f_bavail * fs.f_frsize
    if free < min_free_bytes:
        return WriteProblem(Outage.DISK_FULL, f"the filesystem of {folder} is full: {free} bytes free, less than "
                                              f"store.min_free_bytes={min_free_bytes}")
    return None


def sqlite_write_problem(path: Path, timeout: float, min_free_bytes: int = 0) -> WriteProblem | None:
    """Why the SQLite file at ``path`` cannot take a write now, or None when it can: a read-only
    filesystem, less than ``min_free_bytes`` free on it, or :func:`probe_sqlite_writes` failing
    (read-only file, locked beyond ``timeout``, missing)."""
    problem = space_problem(path.parent, min_free_bytes)
    if problem is not None:
        return problem
    try:
        probe_sqlite_writes(path, timeout)
    except sqlite3.Error as exc:
        # sqlite3 says which by its text only (its error codes need Python 3.11's sqlite_errorcode).
        text = str(exc)
        if "locked" in text or "busy" in text:
            return WriteProblem(Outage.LOCKED,
                                f"{path} is locked by another writer beyond the busy timeout ({timeout:g} s)")
        kind = Outage.READ_ONLY if "readonly" in text or "read-only" in text else Outage.UNREACHABLE
        return WriteProblem(kind, f"{path}: {text}")
    return None
