"""Each check's Evidently snapshot in a local Evidently workspace, for ``evidently ui --workspace``.

Why: Evidently users look at monitoring over time in Evidently's own UI, which reads a workspace (a
folder of projects and snapshots), not loose report files. One project per model (named after it),
created with a dashboard of the series a person watches: drift share, accuracy, ROC AUC and, when
the check estimated them, estimated accuracy and ROC AUC (the figures are the snapshot's own metrics,
so the UI plots them against the check's timestamp).

Retention mirrors ``drift.reports_keep``: the newest ``keep`` snapshots of the model stay, older
ones are deleted, except those of checks named in ``protect`` (an open incident's evidence). Which
snapshot holds which check is kept in ``.driftloop-<model>.json`` at the workspace root (Evidently
lists only folders as projects), so pruning never has to read the snapshots back.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Iterable

from monitor.files import READABLE, atomic_write_text

log = logging.getLogger(__name__)

DASHBOARD_TAB = "Monitoring"


def _panels() -> list[Any]:
    from evidently.sdk.models import PanelMetric
    from evidently.sdk.panels import line_plot_panel

    def metric(name: str, legend: str, **labels: str) -> PanelMetric:
        return PanelMetric(legend=legend, metric=name, metric_labels=labels)

    return [
        line_plot_panel("Drift share", [metric("DriftedColumnsCount", "share of drifted features",
                                               value_type="share")],
                        description="share of monitored features that drifted, per check", size="full"),
        line_plot_panel("Accuracy", [metric("Accuracy", "accuracy (labelled rows)")], size="half"),
        line_plot_panel("ROC AUC", [metric("RocAuc", "ROC AUC (labelled rows)")], size="half"),
    ]


def _index_path(root: Path, model: str) -> Path:
    return root / f".driftloop-{model}.json"


def _read_index(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) and isinstance(data.get("snapshots"), list) else {"snapshots": []}
    except (OSError, ValueError):
        return {"snapshots": []}


def project_for(workspace: Any, model: str) -> Any:
    """The model's project, created with its dashboard the first time."""
    for project in workspace.search_project(model):
        if project.name == model:
            return project
    project = workspace.create_project(model, description=f"driftloop checks of model {model}")
    for panel in _panels():
        project.dashboard.add_panel(panel, tab=DASHBOARD_TAB)
    return project


def add_snapshot(result: Any, folder: str | os.PathLike[str], *, keep: int = 50,
                 protect: Iterable[str] = ()) -> str | None:
    """Add ``result.snapshot`` to the workspace at ``folder`` (named after the check), then prune;
    return the snapshot id, or None when the result carries no snapshot."""
    if result.snapshot is None:
        return None
    from evidently.ui.workspace import Workspace
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    workspace = Workspace(str(root))
    project = project_for(workspace, result.model)
    ref = workspace.add_run(project.id, result.snapshot, name=result.check_id)
    index_path = _index_path(root, result.model)
    index = _read_index(index_path)
    index["project_id"] = str(project.id)
    index["snapshots"].append({"check_id": result.check_id, "snapshot_id": str(ref.id),
                               "checked_at": result.checked_at})
    index["snapshots"] = _prune(workspace, project.id, index["snapshots"], keep, set(protect))
    atomic_write_text(index_path, json.dumps(index), mode=READABLE)
    return str(ref.id)


def _prune(workspace: Any, project_id: Any, entries: list[dict[str, Any]], keep: int,
           protect: set[str]) -> list[dict[str, Any]]:
    if keep <= 0 or len(entries) <= keep:
        return entries
    entries = sorted(entries, key=lambda e: e.get("checked_at") or 0)
    old, kept = entries[:-keep], entries[-keep:]
    for entry in old:
        if entry.get("check_id") in protect:
            kept.append(entry)
            continue
        try:
            workspace.delete_run(project_id, entry["snapshot_id"])
        except Exception as exc:  # one stuck snapshot must not stop the check; it stays indexed
            log.warning("could not delete old Evidently snapshot %s: %s", entry.get("snapshot_id"), exc)
            kept.append(entry)
    return sorted(kept, key=lambda e: e.get("checked_at") or 0)


def snapshot_checks(folder: str | os.PathLike[str], model: str) -> list[str]:
    """The check ids whose snapshots the workspace holds for ``model``, oldest first."""
    return [e["check_id"] for e in _read_index(_index_path(Path(folder), model))["snapshots"]]
