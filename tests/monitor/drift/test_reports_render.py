"""Reports that render where users look: the static summary page (no script, bounded size, the
figures) and the Evidently workspace (a project per model with a dashboard, one snapshot per check,
pruned like the report files, an open incident's snapshot kept)."""
import dataclasses
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from monitor.drift import evaluate_window, save_report
from monitor.drift.history import Cited, HistoryPolicy, prune_history
from monitor.drift.reports import list_reports, summary_path
from monitor.drift.result import FeatureDrift
from monitor.drift.summary import MAX_BYTES, MAX_FEATURES, summary_html
from monitor.drift.workspace import add_snapshot, snapshot_checks
from tests.monitor.drift.conftest import window

T0 = 1_764_460_800.0  # 2025-11-30T00:00:00Z


@pytest.fixture(scope="module")
def result(cfg, ref_frame):
    return evaluate_window(ref_frame, window(1500, seed=21, covariate_shift=1.0, labelled=0.5), cfg.model, cfg.drift,
                           {"accuracy": 0.8, "roc_auc": 0.85}, clock=lambda: T0)


def test_summary_is_written_beside_the_report_small_without_script_with_the_figures(tmp_path, result):
    paths = save_report(result, tmp_path)
    page = summary_path(paths.html)
    assert page.is_file() and page.name.endswith(".summary.html")
    html = page.read_text()
    assert "<script" not in html.lower() and "localstorage" not in html.lower()
    assert len(html.encode()) < 20_000 < paths.html.stat().st_size
    assert f"{result.drift_share:.0%}" in html and result.check_id in html
    assert f"{result.accuracy:.4g}" in html and f"{result.roc_auc:.4g}" in html
    for f in result.features:
        assert f">{f.name}<" in html
        if f.score is not None:
            assert f"{f.score:.4g}" in html
    assert "drifted" in html and paths.html.name in html
    # retention treats the three files as one check
    assert [len(files) for _, _, files in list_reports(tmp_path, "demo")] == [3]


def test_summary_is_bounded_and_escapes_names(result):
    wide = [FeatureDrift(name=f"f{i}<b>" + "x" * 500, method="wasserstein", score=0.01 * i, threshold=0.1,
                         drifted=i % 7 == 0) for i in range(2000)]
    emb = FeatureDrift(name="emb", method="domain_classifier", score=0.91, threshold=0.55, drifted=True,
                       details={"method": "domain_classifier", "roc_auc": 0.91, "dim": 768})
    html = summary_html(dataclasses.replace(result, features=[emb, *wide]))
    assert len(html.encode()) < MAX_BYTES
    assert html.count("<tr>") <= MAX_FEATURES + 20
    assert "<b>" not in html and "&lt;b&gt;" in html
    assert "stable ones not shown" in html
    assert "emb" in html and "domain_classifier" in html and "roc_auc=0.91" in html


def test_workspace_gets_a_project_with_a_dashboard_and_one_snapshot_per_check(tmp_path, result):
    from evidently.ui.workspace import Workspace
    folder = tmp_path / "evidently"
    ids = []
    for i in range(5):
        r = dataclasses.replace(result, check_id=f"c{i}", checked_at=T0 + 3600 * i)
        ids.append(add_snapshot(r, folder))
        assert len(Workspace(str(folder)).list_projects()) == 1
    assert snapshot_checks(folder, "demo") == ["c0", "c1", "c2", "c3", "c4"]
    # History goes by age, never a cited check's: c0 is an incident's evidence, c1 is too old.
    gone = prune_history("demo", HistoryPolicy(days=2.5 / 24), T0 + 3600 * 4, Cited(frozenset({"c0"})),
                         workspace=folder)
    assert gone == ["c1"] and snapshot_checks(folder, "demo") == ["c0", "c2", "c3", "c4"]
    ws = Workspace(str(folder))
    [project] = ws.list_projects()
    assert project.name == "demo"
    runs = {str(s) for s in ws.list_runs(project.id)}
    assert result.estimated_accuracy is not None  # so each check also adds its estimates snapshot
    assert {ids[0], ids[2], ids[3], ids[4]} <= runs and len(runs) == 8
    dashboard = ws.get_dashboard(project.id)
    titles = {p.title for p in dashboard.panels}
    assert {"Drift share", "Accuracy", "ROC AUC"} <= titles
    [tab] = dashboard.tabs
    assert sorted(map(str, tab.panels)) == sorted(str(p.id) for p in dashboard.panels)  # each panel once
    snap = ws.get_run(project.id, ids[4])
    assert snap.name == "c4"
    assert add_snapshot(dataclasses.replace(result, snapshot=None), folder) is None
    index = json.loads((folder / ".driftloop-demo.json").read_text())
    assert index["project_id"] == str(project.id)


def test_an_incidents_report_paths_name_its_checks(tmp_path, result):
    from monitor.drift.reports import report_check_ids
    paths = save_report(result, tmp_path)
    kept = [str(tmp_path / "incidents" / "i1" / p.name) for p in (paths.html, summary_path(paths.html), paths.json)]
    assert report_check_ids([*kept, "/x/notes.txt", "/x/other-20200101T000000Z-abc.json"], "demo") == {result.check_id}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _call(url: str, body: dict | None = None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def test_evidently_ui_serves_every_dashboard_panel_with_data(tmp_path, result):
    """The real ``evidently ui --workspace``: the project is listed and each panel's series has a
    value per check, at the checks' own timestamps."""
    folder = tmp_path / "evidently"
    for i in range(2):
        add_snapshot(dataclasses.replace(result, check_id=f"u{i}", checked_at=T0 + 3600 * i,
                                         snapshot=_at(result.snapshot, T0 + 3600 * i)), folder)
    port = _free_port()
    exe = Path(sys.executable).with_name("evidently")
    proc = subprocess.Popen([str(exe), "ui", "--workspace", str(folder), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                projects = _call(f"{base}/projects")
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.5)
        [project] = projects
        assert project["name"] == "demo"
        dashboard = _call(f"{base}/v2/dashboards/{project['id']}")
        panels = {p["title"]: p for p in dashboard["panels"]}
        for title in ("Drift share", "Accuracy", "ROC AUC", "Estimated performance"):
            filters = [{"tags": [], "metadata": {}, "metric": v["metric"], "metric_labels": v["metric_labels"]}
                       for v in panels[title]["values"]]
            data = _call(f"{base}/v2/snapshots/{project['id']}/data_series_batch", {"series_filter": filters})
            for i in range(len(filters)):
                values = [v for s in data["series"] if s["filter_index"] == i for v in s["values"] if v is not None]
                assert len(values) == 2, (title, filters[i], data["series"])
            if title == "Drift share":
                assert data["series"][0]["values"][0] == pytest.approx(result.drift_share)
        browser = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser")) if p), None)
        if browser is not None:  # what a person sees: the dashboard drawn, one point per check and series
            dom = subprocess.run([browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                                  f"--user-data-dir={tmp_path / 'chromium'}", "--virtual-time-budget=20000",
                                  "--window-size=1400,1400", "--dump-dom",
                                  f"http://127.0.0.1:{port}/projects/{project['id']}"],
                                 capture_output=True, text=True, timeout=180).stdout
            for text in ("Drift share", "accuracy (labelled rows)", "ROC AUC (labelled rows)", "estimated accuracy"):
                assert text in dom, dom[-3000:]
            assert dom.count("<circle") >= 2 * 7, dom[-3000:]  # 7 series (1 + 2 + 2 + 2), 2 checks
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _at(snapshot, ts):
    """The same Evidently snapshot stamped at another time (as a later check's would be)."""
    from datetime import datetime, timezone
    copy = snapshot.__class__.__new__(snapshot.__class__)
    copy.__dict__.update(snapshot.__dict__)
    copy._timestamp = datetime.fromtimestamp(ts, tz=timezone.utc)
    return copy
