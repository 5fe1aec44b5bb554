"""Which checks' history stays on disk: their report files (``reports/``) and their snapshots in the
Evidently workspace, kept by age (``drift.history_days``) and by total size
(``drift.history_max_bytes``), never those an incident or a retrain cites.

Why by time and not by count: Evidently users read the workspace as the long-term record of a
model, and an incident is looked at days or weeks after it happened; a count of checks is hours at
a five-minute interval. A check is one unit: its report files and its snapshots are kept or
deleted together, and the size cap counts both (about 5 MB a check with the default report, most
of it the interactive HTML).

Cited checks (:class:`Cited`) are never deleted: those whose reports an incident names, and every
check that ran while an incident was open (from where its breaching data began to its resolution)
or a retrain ran, so ``evidently ui`` shows the whole incident. They count towards the size cap, so
a long incident leaves less room for the others. The decision (:func:`to_delete`) is a pure function
of the checks, the policy, the clock and the citations; :func:`prune_history` applies it.
"""
from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

if TYPE_CHECKING:
    from monitor.config.checks import DriftConfig

log = logging.getLogger(__name__)

DAY = 86400.0


@dataclass(frozen=True)
class HistoryPolicy:
    """``days``: checks older than this go (None: no age limit); ``max_bytes``: the oldest go while
    the model's history is larger (None: no cap); ``keep``: the deprecated ``drift.reports_keep``,
    at most this many uncited checks (None: no count limit)."""
    days: float | None = 90.0
    max_bytes: int | None = None
    keep: int | None = None

    @classmethod
    def from_config(cls, drift: DriftConfig) -> HistoryPolicy:
        return cls(drift.history_days, drift.history_max_bytes, drift.reports_keep)


@dataclass(frozen=True)
class Cited:
    """The checks that are evidence: named by id (an incident's report files) or run inside a span
    ``(start, end)`` of epoch seconds (an incident's, a retrain's; ``end`` is ``inf`` while open)."""
    check_ids: frozenset[str] = frozenset()
    spans: tuple[tuple[float, float], ...] = ()

    def covers(self, check_id: str, checked_at: float) -> bool:
        return check_id in self.check_ids or any(start <= checked_at <= end for start, end in self.spans)


NOTHING_CITED = Cited()


@dataclass(frozen=True)
class CheckHistory:
    """One check's history: where its files are and how many bytes they hold."""
    check_id: str
    checked_at: float
    nbytes: int
    reports: tuple[Path, ...] = ()
    snapshot_ids: tuple[str, ...] = ()


def to_delete(checks: Sequence[CheckHistory], policy: HistoryPolicy, now: float,
              cited: Cited = NOTHING_CITED) -> list[CheckHistory]:
    """The checks whose history goes, oldest first: uncited ones past ``policy.days``, then the
    oldest uncited ones while the total (cited included) is over ``policy.max_bytes`` or more
    than ``policy.keep`` uncited checks remain."""
    ordered = sorted(checks, key=lambda c: c.checked_at)
    free = [c for c in ordered if not cited.covers(c.check_id, c.checked_at)]
    cutoff = -math.inf if policy.days is None else now - policy.days * DAY
    gone = [c for c in free if c.checked_at < cutoff]
    left = free[len(gone):]  # free is oldest first, so the expired ones are its head
    total = sum(c.nbytes for c in ordered) - sum(c.nbytes for c in gone)
    while left and ((policy.max_bytes is not None and total > policy.max_bytes)
                    or (policy.keep is not None and len(left) > policy.keep)):
        oldest = left.pop(0)
        gone.append(oldest)
        total -= oldest.nbytes
    return gone


def _stamp_seconds(stamp: str) -> float:
    from monitor.drift.reports import STAMP
    return datetime.strptime(stamp, STAMP).replace(tzinfo=timezone.utc).timestamp()


def model_history(model: str, reports_dir: str | os.PathLike[str] | None,
                  workspace: str | os.PathLike[str] | None) -> list[CheckHistory]:
    """Every check of ``model`` with history in ``reports_dir`` or the ``workspace``, oldest first."""
    from monitor.drift.reports import list_reports
    from monitor.drift.workspace import indexed_snapshots
    found: dict[str, CheckHistory] = {}
    for stamp, check_id, files in (list_reports(reports_dir, model) if reports_dir is not None else []):
        found[check_id] = CheckHistory(check_id, _stamp_seconds(stamp), sum(_size(f) for f in files), tuple(files))
    for snap in (indexed_snapshots(workspace, model) if workspace is not None else []):
        have = found.get(snap.check_id)
        found[snap.check_id] = CheckHistory(
            snap.check_id, snap.checked_at if snap.checked_at is not None else (have.checked_at if have else 0.0),
            snap.nbytes + (have.nbytes if have else 0), have.reports if have else (), snap.snapshot_ids)
    return sorted(found.values(), key=lambda c: c.checked_at)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def prune_history(model: str, policy: HistoryPolicy, now: float, cited: Cited = NOTHING_CITED, *,
                  reports_dir: str | os.PathLike[str] | None = None,
                  workspace: str | os.PathLike[str] | None = None) -> list[str]:
    """Delete the history :func:`to_delete` picks for ``model``; return the check ids deleted.
    Best effort per file: one that cannot be deleted is logged and the rest go on."""
    gone = to_delete(model_history(model, reports_dir, workspace), policy, now, cited)
    if not gone:
        return []
    for check in gone:
        for path in check.reports:
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.warning("could not delete old report %s: %s", path, exc)
    if workspace is not None and any(c.snapshot_ids for c in gone):
        from monitor.drift.workspace import delete_snapshots
        delete_snapshots(workspace, model, [c.check_id for c in gone if c.snapshot_ids])
    return [c.check_id for c in gone]


def cited_from(report_paths: Iterable[str | os.PathLike[str]], spans: Iterable[tuple[float, float | None]],
               model: str) -> Cited:
    """:class:`Cited` from the report files incidents name and the spans of incidents and
    retrains (``None`` as an end: still open)."""
    from monitor.drift.reports import report_check_ids
    return Cited(frozenset(report_check_ids(report_paths, model)),
                 tuple((start, math.inf if end is None else end) for start, end in spans))
