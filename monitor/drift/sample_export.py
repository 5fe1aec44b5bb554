"""The rows behind a drift, written out for labelling (``driftloop export-samples``).

From a recorded check's ``drifted_rows`` (:mod:`monitor.drift.drifted_rows`), into a folder::

    OUT/samples.csv          one row per listed row: feature, id, ts, cluster, distance, score,
                             prediction, input_uri, file (its copy, relative to OUT), skipped
    OUT/files/<feature>/cluster-<n>/<rank>-<name>
                             a copy of the row's input, where its input_uri is a file inside
                             model.input_roots

A copy is made only of what :class:`monitor.records.inputs.InputRoots` resolves inside a root (the
resolver ingestion and the trainer use, so a ``..``, an absolute path elsewhere or a link out of a
root is refused here as there); a URI of a listed scheme (``s3://``) is written to the table but
never fetched. The file is opened by its real path without following a final link and must be a
regular file of at most ``max_file_bytes``; the copy keeps the original's permission bits (no
wider than 0644). Every row not copied says why in ``skipped`` (:class:`Skip`). The same race as
the trainer's remains: a writer inside a root could swap a folder for a link between the
resolution and the open; roots are for folders only trusted writers can change.
"""
from __future__ import annotations

import enum
import os
import re
import shutil
import stat
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO, Mapping

import pandas as pd

from monitor.errors import UserInputError
from monitor.files import READABLE, atomic_writer
from monitor.records.inputs import InputRefused, InputRoots, scheme_of

TABLE = "samples"
FILES = "files"
FORMATS = ("csv", "parquet")
MAX_FILE_BYTES = 64 * 1024 * 1024   # an input larger than this is listed, not copied
COLUMNS = ["feature", "id", "ts", "cluster", "distance", "score", "prediction", "input_uri", "file", "skipped"]


class Skip(enum.Enum):
    """Why a row's input was not copied (the table's ``skipped`` column holds the value)."""
    NO_URI = "no_uri"                 # the prediction carried no input_uri
    OUTSIDE_ROOTS = "outside_roots"   # refused by model.input_roots / input_schemes
    REMOTE = "remote"                 # a URI of a listed scheme: driftloop never fetches it
    UNREADABLE = "unreadable"         # missing, not a regular file, or a link at the last step
    TOO_LARGE = "too_large"           # over max_file_bytes


@dataclass(frozen=True)
class ExportedSamples:
    table: Path
    rows: int
    copied: int
    skipped: dict[Skip, int]


def export_samples(drifted_rows: list[Mapping[str, Any]], roots: InputRoots, out: str | os.PathLike[str], *,
                   fmt: str = "csv", max_file_bytes: int = MAX_FILE_BYTES) -> ExportedSamples:
    """Write ``drifted_rows`` (a check's JSON ``drifted_rows``) and the inputs they name into ``out``
    (module docstring). UserInputError when ``out`` already holds an export."""
    if fmt not in FORMATS:
        raise UserInputError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    folder = Path(out)
    table = folder / f"{TABLE}.{fmt}"
    if table.exists() or (folder / FILES).exists():
        raise UserInputError(f"{folder} already holds an export ({table.name} or {FILES}/); choose another --out")
    folder.mkdir(parents=True, exist_ok=True)
    records, skipped = [], Counter[Skip]()
    for block in drifted_rows:
        feature = str(block.get("feature"))
        for rank, row in enumerate(block.get("rows") or []):
            target = folder / FILES / _safe(feature) / f"cluster-{int(row.get('cluster') or 0)}"
            copied, why = _copy(row.get("input_uri"), roots, target, f"{rank:03d}", max_file_bytes)
            if why is not None:
                skipped[why] += 1
            records.append({"feature": feature, "id": row.get("id"), "ts": _iso(row.get("ts")),
                            "cluster": row.get("cluster"), "distance": row.get("distance"), "score": row.get("score"),
                            "prediction": row.get("prediction"), "input_uri": row.get("input_uri"),
                            "file": copied.relative_to(folder).as_posix() if copied is not None else None,
                            "skipped": why.value if why is not None else None})
    frame = pd.DataFrame.from_records(records, columns=COLUMNS)
    with atomic_writer(table, mode=READABLE, binary=fmt == "parquet") as handle:
        if fmt == "parquet":
            frame.astype({"prediction": "string"}).to_parquet(handle, index=False)
        else:
            frame.to_csv(handle, index=False)
    return ExportedSamples(table, len(records), len(records) - sum(skipped.values()), dict(skipped))


def input_file(uri: Any, roots: InputRoots) -> tuple[str | None, Skip | None]:
    """The real path of ``uri``'s file inside the roots (not opened yet), or why there is none. The
    one place a drifted row's input is resolved for reading (the copies here, the summary page's
    previews: monitor/drift/previews.py)."""
    if not isinstance(uri, str) or not uri:
        return None, Skip.NO_URI
    try:
        real = roots.resolve(uri)
    except InputRefused:
        return None, Skip.OUTSIDE_ROOTS
    if scheme_of(uri) not in (None, "file"):
        return None, Skip.REMOTE
    return real, None


def open_regular(real: str) -> tuple[BinaryIO | None, os.stat_result | None]:
    """``real`` opened for reading without following a final link, and its status; ``(None, None)``
    unless it is a regular file (a FIFO is opened without blocking, then refused)."""
    try:
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None, None
    source = os.fdopen(fd, "rb")
    info = os.fstat(source.fileno())
    if not stat.S_ISREG(info.st_mode):
        source.close()
        return None, None
    return source, info


def _copy(uri: Any, roots: InputRoots, folder: Path, rank: str, limit: int) -> tuple[Path | None, Skip | None]:
    """The copy of ``uri``'s file in ``folder``, or why there is none."""
    real, why = input_file(uri, roots)
    if real is None:
        return None, why
    source, info = open_regular(real)
    if source is None or info is None:
        return None, Skip.UNREADABLE
    with source:
        if info.st_size > limit:
            return None, Skip.TOO_LARGE
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{rank}-{_safe(os.path.basename(real))}"
        with open(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IMODE(info.st_mode) & 0o644),
                  "wb") as copy:
            shutil.copyfileobj(source, copy)
    return target, None


def _safe(name: str) -> str:
    """A file name of letters, digits, ``.``, ``_`` and ``-`` only (at most 100 characters)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".")[:100]
    return cleaned or "input"


def _iso(ts: Any) -> str | None:
    if not isinstance(ts, (int, float)):
        return None
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
