"""A model removed on reload takes its fleet series with it: /metrics must not keep serving
``driftloop_fleet_check_delay_seconds{model}`` or ``driftloop_fleet_checks_skipped_total{model}`` of a
model the daemon no longer hosts (a stale series that names it forever)."""
from __future__ import annotations

import yaml

from monitor.config import load_config
from tests.monitor.fleet.test_fleet_reload import NUMERIC, write_models


def _fleet_models(collector) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for family in collector.collect():
        if family.name.startswith("driftloop_fleet_"):
            for s in family.samples:
                if "model" in s.labels:
                    out.setdefault(family.name, set()).add(s.labels["model"])
    return out


def test_a_removed_models_fleet_series_go_with_it(tmp_path):
    from monitor.daemon.runtime.fleet import Fleet
    from monitor.daemon.runtime.fleet_metrics import FleetCollector

    config = tmp_path / "driftloop.yaml"
    config.write_text(yaml.safe_dump({"home": str(tmp_path / "home"), "models_dir": "models",
                                      "server": {"gpu_metrics": False}}))
    write_models(tmp_path / "models", {"a": {"model": {"features": NUMERIC}}, "b": {"model": {"features": NUMERIC}}})
    fleet = Fleet(load_config(config, environ={}))
    fleet.start(scheduler=False)
    try:
        collector = FleetCollector(fleet)
        fleet.jobs.delays["a"] = [0.3]   # as the shared pool records them: a check of a waited, and one was skipped
        fleet.jobs.skipped["a"] = 1
        before = _fleet_models(collector)
        assert before["driftloop_fleet_check_delay_seconds"] == {"a", "b"}
        assert before["driftloop_fleet_checks_skipped"] == {"a", "b"}
        write_models(tmp_path / "models", {"b": {"model": {"features": NUMERIC}}})
        assert fleet.reload(load_config(config, environ={}))["removed"] == ["a"]
        after = _fleet_models(collector)
        assert after["driftloop_fleet_check_delay_seconds"] == {"b"}
        assert after["driftloop_fleet_checks_skipped"] == {"b"}
    finally:
        fleet.stop()
