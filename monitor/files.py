"""Atomic file writes, one helper for every part (bottom layer): checkpoints, retrain requests and
results, drift reports. A reader or a crash sees the old file or the new one, never half of one.

The recipe, and why each step: write a temporary file in the same folder (``os.replace`` is atomic
only within one filesystem); fsync it (else a power cut can leave the renamed name pointing at
unwritten blocks); ``os.replace`` it over the target; fsync the folder (else the rename itself can
be lost). The mode is explicit because it differs by purpose: 0600 for anything carrying the
configuration (a store or MLflow URL may hold a password), 0644 for reports people read.
"""
from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator

PRIVATE = 0o600
READABLE = 0o644


@contextmanager
def atomic_writer(path: str | os.PathLike[str], *, mode: int, binary: bool = False) -> Iterator[IO[Any]]:
    """A file object whose contents replace ``path`` atomically when the block ends without an error
    (on an error the temporary file is removed and ``path`` is untouched)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else "utf-8") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_folder(path.parent)


def fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: str | os.PathLike[str], text: str, *, mode: int) -> None:
    with atomic_writer(path, mode=mode) as f:
        f.write(text)


def atomic_write_json(path: str | os.PathLike[str], body: Any, *, mode: int, **dumps: Any) -> None:
    """``body`` as JSON (``dumps`` are :func:`json.dumps` options, e.g. ``default=str``)."""
    atomic_write_text(path, json.dumps(body, **dumps), mode=mode)
