"""prometheus.yml: valid, its rule files found, and pointing at the services docker-compose.yml runs."""
from __future__ import annotations

import yaml

from monitor.config import ExporterConfig, ServerConfig
from tests.observability.conftest import run
from tests.observability.promql import REPO, RULE_FILES

CONFIG = REPO / "prometheus.yml"


def _jobs() -> dict[str, dict]:
    return {job["job_name"]: job for job in yaml.safe_load(CONFIG.read_text())["scrape_configs"]}


def test_promtool_check_config_finds_the_rules(promtool, tmp_path):
    # From an unrelated folder: rule_files must resolve against prometheus.yml's own folder.
    proc = run([promtool, "check", "config", str(CONFIG)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(RULE_FILES)} rule files found" in proc.stdout
    for path in RULE_FILES:
        assert f"Checking {path}" in proc.stdout


def test_promtool_rejects_a_broken_config(promtool, tmp_path):
    broken = tmp_path / "prometheus.yml"
    broken.write_text(CONFIG.read_text().replace("scrape_interval: 15s", "scrape_interval: fifteen"))
    proc = run([promtool, "check", "config", str(broken)])
    assert proc.returncode != 0


def test_scrapes_driftloop_on_its_default_port():
    job = _jobs()["driftloop"]
    assert job["static_configs"][0]["targets"] == [f"driftloop:{ServerConfig().port}"]


def test_standalone_exporter_and_node_jobs_are_documented_examples():
    text = CONFIG.read_text()
    assert f'#     - targets: ["gpu-node-1:{ExporterConfig().port}"' in text
    assert "# - job_name: driftloop-gpu" in text  # the job name DriftloopGpuExporterDown watches
    assert "# - job_name: node" in text


def test_alerts_go_to_alertmanager():
    cfg = yaml.safe_load(CONFIG.read_text())
    targets = cfg["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert targets == ["alertmanager:9093"]
    assert cfg["rule_files"] == ["rules/*.rules.yml"]
