"""Each check's Evidently snapshot in a local Evidently workspace, for ``evidently ui --workspace``.

Why: Evidently users look at monitoring over time in Evidently's own UI, which reads a workspace (a
folder of projects and snapshots), not loose report files. One project per model (named after it),
created with a dashboard of the series a person watches: drift share, accuracy, ROC AUC and, when
the check estimated them, estimated accuracy and ROC AUC (from a one-row estimates snapshot per check,
see :func:`_estimates_snapshot`). Every figure is a snapshot metric, plotted at the check's timestamp.

Retention is :mod:`monitor.drift.history`'s: by age and size, never a check an incident or a
retrain cites, so the UI shows a whole incident weeks later. Which snapshot holds which check is
kept in ``.driftloop-<model>.json`` at the workspace root (Evidently lists only folders as
projects), so pruning never has to read the snapshots back.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Iterable, NamedTuple

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
        line_plot_panel("Accuracy", [metric("Accuracy", "accuracy (labelled rows)"),
                                     metric("MeanValue", "estimated accuracy (from scores)",
                                            column="estimated_accuracy")], size="half"),
        line_plot_panel("ROC AUC", [metric("RocAuc", "ROC AUC (labelled rows)"),
                                    metric("MeanValue", "estimated ROC AUC (from scores)",
                                           column="estimated_roc_auc")], size="half"),
        line_plot_panel("Estimated performance", [
            metric("MeanValue", "estimated accuracy", column="estimated_accuracy"),
            metric("MeanValue", "estimated ROC AUC", column="estimated_roc_auc")],
            description="accuracy and ROC AUC estimated from the scores alone (CBPE), before labels arrive",
            size="full"),
    ]


ESTIMATES = ("estimated_accuracy", "estimated_roc_auc")


def _estimates_snapshot(result: Any) -> Any:
    """A small snapshot of the check's estimated performance, or None when it estimated nothing.
    Why a second snapshot: the estimates are driftloop's own figures, not metrics of Evidently's
    report; a one-row table through Evidently's built-in ``MeanValue`` puts them on the dashboard
    as series any ``evidently ui`` can read (a custom metric class would need driftloop installed
    in the UI's environment)."""
    values = {k: getattr(result, k, None) for k in ESTIMATES}
    values = {k: float(v) for k, v in values.items() if v is not None}
    if not values:
        return None
    from datetime import datetime, timezone

    import pandas as pd
    from evidently import Report
    from evidently.metrics import MeanValue
    report = Report([MeanValue(column=k) for k in values])
    return report.run(pd.DataFrame([values]), None, name=f"{result.check_id} estimates",
                      timestamp=datetime.fromtimestamp(result.checked_at, tz=timezone.utc),
                      tags=["driftloop-estimates"], metadata={"model": result.model, "check_id": result.check_id})


def _index_path(root: Path, model: str) -> Path:
    return root / f".driftloop-{model}.json"


def _read_index(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) and isinstance(data.get("snapshots"), list) else {"snapshots": []}
    except (OSError, ValueError):
        return {"snapshots": []}


def open_workspace(folder: str | os.PathLike[str]) -> Any:
    """Evidently's local ``Workspace`` at ``folder``, without its dataset manager. Why: ``Workspace()``
    builds one whose project manager parses every snapshot in the folder (0.2 s at 30 small ones,
    minutes at the thousands a 90-day history holds) on every check; driftloop adds no datasets,
    and projects, dashboards and runs all go through the workspace's light ``state``."""
    from evidently.ui.storage.local.base import LocalState
    from evidently.ui.workspace import Workspace

    class SnapshotWorkspace(Workspace):
        def __init__(self, path: str):  # Workspace.__init__ less the dataset, artifact and tracing APIs
            self.path = path
            self.state = LocalState(path)

    return SnapshotWorkspace(str(folder))


def project_for(workspace: Any, model: str) -> Any:
    """The model's project, created with its dashboard the first time."""
    for project in workspace.search_project(model):
        if project.name == model:
            return project
    project = workspace.create_project(model, description=f"driftloop checks of model {model}")
    # One save of the whole dashboard: Evidently 0.7's add_panel lists a panel twice in an existing tab.
    from evidently.sdk.models import DashboardModel, DashboardTabModel
    panels = _panels()
    workspace.save_dashboard(project.id, DashboardModel(
        tabs=[DashboardTabModel(title=DASHBOARD_TAB, panels=[p.id for p in panels])], panels=panels))
    return project


def add_snapshot(result: Any, folder: str | os.PathLike[str]) -> str | None:
    """Add ``result.snapshot`` to the workspace at ``folder`` (named after the check; with a small
    estimates snapshot when the check estimated performance); return the report's snapshot id, or
    None when the result carries no snapshot."""
    if result.snapshot is None:
        return None
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    workspace = open_workspace(root)
    project = project_for(workspace, result.model)
    ref = workspace.add_run(project.id, result.snapshot, name=result.check_id)
    ids = [str(ref.id)]
    estimates = _estimates_snapshot(result)
    if estimates is not None:
        ids.append(str(workspace.add_run(project.id, estimates).id))
    index_path = _index_path(root, result.model)
    index = _read_index(index_path)
    index["project_id"] = str(project.id)
    index["snapshots"].append({"check_id": result.check_id, "snapshot_ids": ids, "checked_at": result.checked_at})
    atomic_write_text(index_path, json.dumps(index), mode=READABLE)
    return str(ref.id)


class IndexedSnapshot(NamedTuple):
    check_id: str
    checked_at: float | None
    snapshot_ids: tuple[str, ...]
    nbytes: int


def _snapshot_file(root: Path, project_id: str, snapshot_id: str) -> Path:
    return root / project_id / "snapshots" / f"{snapshot_id}.json"  # Evidently 0.7's local layout


def indexed_snapshots(folder: str | os.PathLike[str], model: str) -> list[IndexedSnapshot]:
    """The checks the workspace holds snapshots of for ``model``, with their size on disk."""
    root = Path(folder)
    index = _read_index(_index_path(root, model))
    project_id = str(index.get("project_id", ""))
    found = []
    for entry in index["snapshots"]:
        ids = tuple(str(i) for i in entry.get("snapshot_ids", []))
        size = 0
        for snapshot_id in ids:
            try:
                size += _snapshot_file(root, project_id, snapshot_id).stat().st_size
            except OSError:
                pass
        found.append(IndexedSnapshot(str(entry.get("check_id")), entry.get("checked_at"), ids, size))
    return found


def delete_snapshots(folder: str | os.PathLike[str], model: str, check_ids: Iterable[str]) -> None:
    """Delete the snapshots of ``check_ids`` from the workspace and its index. One that cannot be
    deleted is logged and stays indexed (the next prune tries again)."""
    root = Path(folder)
    index_path = _index_path(root, model)
    index = _read_index(index_path)
    if not index.get("project_id"):
        return
    workspace = open_workspace(root)
    doomed, kept = set(check_ids), []
    for entry in index["snapshots"]:
        if entry.get("check_id") not in doomed:
            kept.append(entry)
            continue
        try:
            for snapshot_id in entry.get("snapshot_ids", []):
                workspace.delete_run(index["project_id"], snapshot_id)
        except Exception as exc:  # one stuck snapshot must not stop the check; it stays indexed
            log.warning("could not delete the old Evidently snapshots of check %s: %s", entry.get("check_id"), exc)
            kept.append(entry)
    index["snapshots"] = kept
    atomic_write_text(index_path, json.dumps(index), mode=READABLE)


def snapshot_checks(folder: str | os.PathLike[str], model: str) -> list[str]:
    """The check ids whose snapshots the workspace holds for ``model``, oldest first."""
    return [e["check_id"] for e in _read_index(_index_path(Path(folder), model))["snapshots"]]
