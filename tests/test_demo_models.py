"""``driftloop demo --models 2`` (monitor/demo_models.py): a classifier and a regressor in one daemon,
drift in the classifier's traffic only. End to end with the real parts, on a small plan."""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from monitor.demo import DemoPlan, prepare_home
from monitor.demo_models import make_demand, models_config, run_models_demo
from tests.support.services import free_port

# Smaller than DemoPlan.fast(): the story needs two breaching windows of drifted labels, a retrain
# and one batch served by the new champion.
PLAN = DemoPlan(baseline_rows=4000, batch=1000, ticks_before=2, ticks_after=9, recovery_ticks=1, check_interval=1.0)


@pytest.mark.slow
def test_only_the_drifted_model_opens_an_incident_retrains_and_promotes(tmp_path):
    home = tmp_path / "demo"
    prepare_home(home)
    cfg = models_config(home, free_port(), PLAN)
    lines: list[str] = []
    result = run_models_demo(cfg, PLAN, echo=lines.append)

    churn, demand = result.models["churn"], result.models["demand"]
    assert (churn.task, churn.drifted, demand.task, demand.drifted) == ("binary", True, "regression", False)
    # The drifted model: an incident for its accuracy, a promoted retrain, traffic served by the new champion.
    assert [reason for reason, _ in churn.incidents] == ["accuracy"], churn.incidents
    assert "promoted" in churn.retrains and churn.final_champion != churn.baseline_version
    assert any(t["churn"].served_by == churn.final_champion for t in result.ticks)
    # The other model: checked all along, nothing opened, nothing retrained, its champion kept.
    assert demand.incidents == [] and demand.retrains == [] and demand.promoted_versions == []
    assert demand.final_champion == demand.baseline_version
    assert sum(t["demand"].metric is not None for t in result.ticks) >= len(result.ticks) - 2
    # Both checked against their own champion's metric: accuracy for one, MAE for the other.
    assert churn.before is not None and 0.8 < churn.before <= 1.0
    assert demand.before is not None and demand.end is not None and demand.end < 1.5 * demand.before
    assert (home / "driftloop.yaml").exists() and any("--model NAME status" in line for line in lines)


def test_the_two_models_config_is_a_fleet_of_a_classifier_and_a_regressor(tmp_path):
    from monitor.config import load_config

    prepare_home(tmp_path / "demo")
    base = load_config(path=None, environ={}, overrides={"server": {"token": "t" * 32}})
    cfg = models_config(tmp_path / "demo", 8999, PLAN, base=base)
    configs = cfg.model_configs()
    assert cfg.is_fleet and list(configs) == ["churn", "demand"]
    assert [str(c.model.task) for c in configs.values()] == ["binary", "regression"]
    assert configs["demand"].model.target == "demand"
    assert {c.registered_model_name for c in configs.values()} == {"driftloop-churn", "driftloop-demand"}
    assert cfg.server.token == "t" * 32 and "t" * 32 not in (tmp_path / "demo" / "driftloop.yaml").read_text()
    # The file written is what `driftloop --config` reads afterwards.
    assert list(load_config(tmp_path / "demo" / "driftloop.yaml", environ={}).model_configs()) == ["churn", "demand"]


def test_make_demand_is_deterministic_and_moves_only_with_its_knobs():
    a, b = make_demand(500, seed=3), make_demand(500, seed=3)
    assert a.equals(b) and "label" not in a and a["demand"].between(0, 250).mean() > 0.99
    moved = make_demand(500, seed=3, covariate_shift=1.0)
    assert moved["x0"].mean() > a["x0"].mean() + 0.5
    turned = make_demand(500, seed=3, concept_shift=1.0)
    assert np.allclose(turned["x1"], a["x1"]) and not np.allclose(turned["demand"], a["demand"])


def test_models_2_runs_the_tabular_example_only(tmp_path):
    from monitor.cli import cli

    result = CliRunner().invoke(cli, ["demo", "--models", "2", "--example", "digits", "--home", str(tmp_path / "d")])
    assert result.exit_code == 2 and "--models 2" in result.output
