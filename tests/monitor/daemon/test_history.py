"""Check history that lasts: the daemon's report saver with a real store, reports folder and
Evidently workspace, an injected clock and more checks than the old ``reports_keep`` (50). An
incident's checks (its whole span, resolved or not) and a retrain's stay; the rest go by size and,
weeks later, by age."""
from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from monitor.config import load_config
from monitor.daemon.decisions.kinds import State
from monitor.daemon.runtime.wiring import ReportSaver
from monitor.daemon.state.attempts import AttemptStore
from monitor.daemon.state.citations import history_citations
from monitor.daemon.state.incidents import IncidentStore
from monitor.drift.history import DAY, model_history
from monitor.drift.reports import list_reports
from monitor.drift.workspace import snapshot_checks
from tests.monitor.daemon.conftest import Clock

INTERVAL = 300.0
CAP = 1024 ** 2  # 1 MiB: about 25 of these small checks


@pytest.fixture(scope="module")
def small_result():
    """A real check result whose Evidently snapshot is tiny, so 60 checks save in seconds."""
    from evidently import Report
    from evidently.metrics import MeanValue

    from monitor.drift import evaluate_window
    from tests.monitor.drift.conftest import reference, window
    cfg = load_config(path=None, environ={}, overrides={"home": "unused"})
    result = evaluate_window(reference(1000), window(600, seed=3), cfg.model, cfg.drift,
                             {"accuracy": 0.8, "roc_auc": 0.85}, clock=lambda: 0.0)
    tiny = Report([MeanValue(column="x")]).run(pd.DataFrame({"x": [1.0, 2.0]}), None)
    return dataclasses.replace(result, snapshot=tiny)


def test_an_incidents_and_a_retrains_checks_outlast_size_and_age(tmp_path, engine, small_result):
    cfg = load_config(path=None, environ={}, overrides={
        "home": str(tmp_path / "home"), "model": {"name": "demo"},
        "drift": {"history_max_bytes": CAP, "report_max_bytes": 64 * 1024}})
    clock = Clock(1_764_460_800.0)
    model = cfg.model.name
    incidents, attempts = IncidentStore(engine, model, clock), AttemptStore(engine, model, clock)
    save = ReportSaver(cfg, lambda: history_citations(engine, model))
    done: list[str] = []
    incident_id = attempt_id = None
    for i in range(60):
        check_id = f"c{i:02d}"
        html, _ = save(dataclasses.replace(small_result, model=model, check_id=check_id, checked_at=clock()),
                       clock())
        done.append(check_id)
        if i == 10:  # opens on c10, citing its report; its breaching data began two checks before
            incident_id = incidents.open("accuracy", "alert", "accuracy dropped", report_paths=[str(html)],
                                         window_start=clock() - 2 * INTERVAL).id
        if i == 14:
            incidents.transition(incident_id, State.RESOLVED, "healthy again")
        if i == 30:
            attempt_id = attempts.begin("", "manual").id
        if i == 32:
            attempts.finish(attempt_id, "rejected")
        clock.advance(INTERVAL)

    incident_checks = [f"c{i:02d}" for i in range(8, 15)]
    retrain_checks = ["c30", "c31", "c32"]
    kept = snapshot_checks(cfg.evidently_workspace, model)
    reported = [cid for _, cid, _ in list_reports(cfg.reports_dir, model)]
    assert set(incident_checks + retrain_checks) <= set(kept) and set(incident_checks + retrain_checks) <= set(reported)
    assert "c00" not in kept and "c20" not in kept and kept[-1] == "c59"  # the oldest uncited went for size
    assert kept == reported  # a check's reports and snapshots go together
    assert sum(c.nbytes for c in model_history(model, cfg.reports_dir, cfg.evidently_workspace)) <= CAP

    # Weeks later, past drift.history_days: only the cited checks and the newest one remain.
    clock.advance(91 * DAY)
    save(dataclasses.replace(small_result, model=model, check_id="late", checked_at=clock()), clock())
    assert snapshot_checks(cfg.evidently_workspace, model) == [*incident_checks, *retrain_checks, "late"]
    from evidently.ui.workspace import Workspace
    workspace = Workspace(str(cfg.evidently_workspace))
    [project] = workspace.list_projects()
    assert len(workspace.list_runs(project.id)) == 2 * (len(incident_checks) + len(retrain_checks) + 1)  # + estimates
