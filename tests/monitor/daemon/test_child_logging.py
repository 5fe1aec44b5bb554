"""The retrain child logs the way its daemon is configured: one logging set-up (monitor.logs) for
every process, so ``logging.format: json`` yields JSON lines from the child too (issue 14)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _run_child(tmp_path: Path, logging_config: dict) -> tuple[int, list[str]]:
    job = tmp_path / "job"
    job.mkdir()
    (job / "job.json").write_text(json.dumps({"attempt_id": "a1", "incident_id": "i1"}))
    (job / "request.json").write_text(json.dumps({
        "config": {"home": str(tmp_path / "home"), "logging": logging_config},
        "trigger": "alert", "incident_id": "i1",
        "window": {"source": "file", "path": str(tmp_path / "missing.parquet")}}))
    proc = subprocess.run([sys.executable, "-m", "monitor.daemon.retraining.worker", str(job)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, [line for line in proc.stderr.splitlines() if line.strip()]


def test_the_retrain_child_writes_json_lines_when_configured(tmp_path):
    code, lines = _run_child(tmp_path, {"format": "json", "level": "INFO"})
    assert code == 2  # the window file is missing: an expected failure, reported in result.json
    logged = [json.loads(line) for line in lines if line.startswith("{")]
    assert any(r["logger"] == "trainer.worker" and r["msg"].startswith("retrain request: trigger alert")
               and r["level"] == "info" for r in logged), lines
    assert all(line.startswith("{") or line.startswith("Error: ") for line in lines), lines
    assert json.loads((tmp_path / "job" / "result.json").read_text())["status"] == "error"


def test_the_retrain_child_writes_text_by_default(tmp_path):
    code, lines = _run_child(tmp_path, {})
    assert code == 2
    assert any("INFO" in line and "trainer.worker: retrain request" in line for line in lines), lines
    assert not any(line.startswith("{") for line in lines)
