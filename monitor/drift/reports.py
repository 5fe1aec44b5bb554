"""Evidently snapshots on disk: ``<model>-<UTC timestamp>-<check id>.html`` and ``.json``, plus a
static ``.summary.html`` (:mod:`monitor.drift.summary`: no script, bounded size) that renders where
the interactive report cannot, such as MLflow's artifact viewer.

Files are written atomically (temporary name, then ``os.replace``), so a reader or a crash never
leaves half a report. The JSON is Evidently's ``snapshot.dict()`` (``metrics``, ``tests``) with
our own figures under ``driftloop`` (``CheckResult.to_dict()``, including the exact accuracy and
ROC AUC on all labelled rows and their intervals). Retention is :mod:`monitor.drift.history`'s (by
age and size, never a cited check's); it never touches other files.

Each file is bounded by ``max_bytes`` (``drift.report_max_bytes``): Evidently draws every value of a
categorical column, and a window of long or countless categories once made a 200 MB HTML report on
every check. Past the bound the interactive HTML is replaced by a short page saying so (the static
summary stays), and the JSON keeps our own figures without Evidently's; ``driftloop.report_omitted``
in the JSON records what was left out.
"""
from __future__ import annotations

import json
import logging
import math
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, NamedTuple

from monitor.drift.result import CheckResult
from monitor.files import READABLE, atomic_write_text
from monitor.records.inputs import InputRoots

log = logging.getLogger(__name__)

STAMP = "%Y%m%dT%H%M%SZ"
DEFAULT_MAX_BYTES = 20 * 1024 * 1024  # drift.report_max_bytes's default


class ReportPaths(NamedTuple):
    html: Path | None
    json: Path | None


def report_stem(model: str, checked_at: float, check_id: str) -> str:
    stamp = datetime.fromtimestamp(checked_at, tz=timezone.utc).strftime(STAMP)
    return f"{model}-{stamp}-{check_id}"


def _pattern(model: str) -> re.Pattern[str]:
    return re.compile(rf"^{re.escape(model)}-(\d{{8}}T\d{{6}}Z)-([0-9a-zA-Z]+)\.(summary\.html|html|json)$")


def summary_path(html: str | os.PathLike[str]) -> Path:
    """The static summary page beside an interactive report ``<stem>.html``."""
    return Path(html).with_suffix(".summary.html")


def _write_atomic(path: Path, text: str) -> None:
    atomic_write_text(path, text, mode=READABLE)  # reports are for people and dashboards to read


def save_report(result: CheckResult, reports_dir: str | os.PathLike[str], *,
                checked_at: float | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
                roots: InputRoots | None = None) -> ReportPaths:
    """Write the check's snapshot as HTML and JSON (and the static summary beside the HTML);
    ``(None, None)`` when the result carries no snapshot. Neither file exceeds ``max_bytes``.
    ``roots`` (the model's ``InputRoots``): the summary shows previews of the drifted rows' inputs
    it lets be read (monitor/drift/previews.py); None reads none.
    Old reports are pruned by :func:`monitor.drift.history.prune_history`."""
    if result.snapshot is None:
        return ReportPaths(None, None)
    folder = Path(reports_dir)
    folder.mkdir(parents=True, exist_ok=True)
    stem = report_stem(result.model, result.checked_at if checked_at is None else checked_at, result.check_id)
    html, js = folder / f"{stem}.html", folder / f"{stem}.json"
    ours = result.to_dict()
    omitted: dict[str, int] = {"limit": max_bytes}
    page = result.snapshot.get_html_str(as_iframe=False)
    if len(page) > max_bytes:  # characters: a lower bound of the bytes, and cheap
        omitted["html_bytes"] = len(page.encode("utf-8"))
        page = _omitted_page(html.with_suffix(".summary.html").name, omitted["html_bytes"], max_bytes)
    body = result.snapshot.dict()
    body["driftloop"] = ours
    text = json.dumps(_json_safe(body), allow_nan=False)
    if len(text) > max_bytes:
        omitted["json_bytes"] = len(text.encode("utf-8"))
    if len(omitted) > 1:
        log.warning("the report of check %s exceeds drift.report_max_bytes (%d): %s; Evidently's part left out",
                    result.check_id, max_bytes, ", ".join(f"{k} {v}" for k, v in omitted.items() if k != "limit"))
        ours["report_omitted"] = omitted  # body["driftloop"] is ours: recorded either way
        text = json.dumps(_json_safe({"driftloop": ours} if "json_bytes" in omitted else body), allow_nan=False)
    del body
    _write_atomic(js, text)
    _write_atomic(html, page)
    del page, text
    from monitor.drift.previews import InputPreviews
    from monitor.drift.summary import summary_html
    previews = InputPreviews(roots) if roots is not None else None
    _write_atomic(summary_path(html), summary_html(result, interactive_name=html.name, previews=previews))
    return ReportPaths(html, js)


def _omitted_page(summary_name: str, size: int, limit: int) -> str:
    from html import escape
    return (f"<!doctype html><meta charset=utf-8><title>report not kept</title><p>The interactive Evidently report "
            f"of this check was {size} bytes, over <code>drift.report_max_bytes</code> ({limit}), and was not kept "
            f"(long or very many categorical values draw large reports). The check's figures are in "
            f"<a href=\"{escape(summary_name)}\">the summary page</a> and the JSON report beside this file.</p>\n")


def _json_safe(obj):
    """Evidently's dict() holds numpy scalars and NaN (an undefined metric): make it strict JSON."""
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        try:
            obj = obj.item()
        except (TypeError, ValueError):
            return str(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)


def list_reports(reports_dir: str | os.PathLike[str], model: str) -> list[tuple[str, str, list[Path]]]:
    """``(timestamp, check_id, files)`` per check of ``model``, oldest first."""
    pattern = _pattern(model)
    checks: dict[tuple[str, str], list[Path]] = {}
    folder = Path(reports_dir)
    if not folder.is_dir():
        return []
    for entry in folder.iterdir():
        m = pattern.match(entry.name)
        if m and entry.is_file():
            checks.setdefault((m.group(1), m.group(2)), []).append(entry)

    def order(item):
        (stamp, _), files = item
        return stamp, max(f.stat().st_mtime for f in files)

    return [(stamp, cid, sorted(files)) for (stamp, cid), files in sorted(checks.items(), key=order)]


def report_check_ids(paths: Iterable[str | os.PathLike[str]], model: str) -> set[str]:
    """The check ids named by report file paths of ``model`` (an incident's evidence)."""
    pattern = _pattern(model)
    return {m.group(2) for p in paths if (m := pattern.match(Path(p).name))}
