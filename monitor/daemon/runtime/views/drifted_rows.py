"""The rows behind a drift, as people read them in ``driftloop status``, ``driftloop check`` and
``GET /v1/status``: per drifted embedding feature, how many rows lay beyond the reference, its
clusters, and the first few of its farthest rows (the check's JSON and report list every one,
:mod:`monitor.drift.drifted_rows`). Each row's ``input_uri`` is shown here under that key, which
:func:`monitor.daemon.runtime.views.status.public_status` hides from untrusted callers."""
from __future__ import annotations

from typing import Any

TOP_ROWS = 5   # rows per feature in the status (the check's JSON has all it listed)


def drifted_summary(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The summary of a check's ``drifted_rows`` (its JSON, ``CheckResult.to_dict()``); [] when none."""
    out = []
    for block in result.get("drifted_rows") or []:
        if not isinstance(block, dict):
            continue
        rows = block.get("rows") or []
        out.append({"feature": block.get("feature"), "atypical_rows": block.get("atypical_rows"),
                    "scored_rows": block.get("scored_rows"), "threshold": block.get("threshold"),
                    "listed": len(rows), "clusters": list(block.get("clusters") or []),
                    "top": [{k: r.get(k) for k in ("id", "distance", "cluster", "input_uri")}
                            for r in rows[:TOP_ROWS] if isinstance(r, dict)]})
    return out


def render_drifted(summary: list[dict[str, Any]], check_id: Any = None, indent: str = "  ") -> list[str]:
    """Lines for the text status: one per feature, its clusters by size, and how to export the rows."""
    lines = []
    for s in summary:
        sizes = ", ".join(f"{c.get('size')} rows (e.g. {', '.join(str(e) for e in c.get('examples') or [])})"
                          for c in s["clusters"])
        lines.append(f"{indent}rows       {s['feature']}: {s['atypical_rows']} of {s['scored_rows']} beyond the "
                     f"reference; the {s['listed']} farthest in {len(s['clusters'])} cluster(s): {sizes or '-'}")
    if lines:
        which = f"--check {check_id}" if check_id is not None else "--last"
        lines.append(f"{indent}           driftloop export-samples {which} --out DIR writes them out for labelling")
    return lines
