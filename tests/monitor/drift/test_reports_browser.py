"""The check's summary page renders in MLflow's artifact viewer, in headless Chromium against a
real ``mlflow server``: the viewer shows HTML in a sandboxed blob iframe, which a screenshot shows
(``--dump-dom`` does not reach into the iframe), so the test measures ink in the viewer's pane."""
import shutil
import subprocess

import mlflow
import pytest

from monitor.drift import evaluate_window, save_report
from monitor.drift.reports import summary_path
from tests.monitor.drift.conftest import window
from tests.support.mlflow_server import start_mlflow_server

T0 = 1_764_460_800.0
SIZE = (1400, 1000)
PANE = (430, 230, 1000, 900)  # the artifact viewer's content pane at SIZE (left, top, right, bottom)


def _chromium() -> str | None:
    return next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)


def _ink(browser: str, url: str, shot) -> float:
    """Share of the viewer pane's pixels that are not near-white, after the page settled."""
    from PIL import Image
    subprocess.run([browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    f"--user-data-dir={shot.parent / 'chromium'}", "--virtual-time-budget=20000",
                    f"--window-size={SIZE[0]},{SIZE[1]}", f"--screenshot={shot}", url],
                   capture_output=True, timeout=180, check=True)
    pane = Image.open(shot).convert("L").crop(PANE)
    counts = pane.histogram()  # 256 grey levels
    return sum(counts[:200]) / sum(counts)


def test_the_summary_renders_in_mlflows_artifact_viewer(cfg, ref_frame, tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (scripts/setup.sh installs it)")
    result = evaluate_window(ref_frame, window(1500, seed=21, covariate_shift=1.0, labelled=0.5), cfg.model,
                             cfg.drift, {"accuracy": 0.8, "roc_auc": 0.85}, clock=lambda: T0)
    paths = save_report(result, tmp_path / "reports")
    blank = tmp_path / "blank.html"
    blank.write_text("<!doctype html><html><body></body></html>")
    server = start_mlflow_server(tmp_path / "server")
    try:
        mlflow.set_tracking_uri(server.url)
        exp_id = mlflow.set_experiment("reports").experiment_id
        with mlflow.start_run() as run:
            for p in (summary_path(paths.html), blank):
                mlflow.log_artifact(str(p), "reports")
        base = f"{server.url}/#/experiments/{exp_id}/runs/{run.info.run_id}/artifacts/reports"
        summary = _ink(browser, f"{base}/{summary_path(paths.html).name}", tmp_path / "summary.png")
        empty = _ink(browser, f"{base}/blank.html", tmp_path / "blank.png")
    finally:
        mlflow.set_tracking_uri(None)
        server.stop()
    assert empty < 0.002, empty          # the pane is where we measure: an empty page leaves it white
    assert summary > 0.01, summary       # the summary's text and tables are drawn there
