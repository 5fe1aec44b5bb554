"""The demo is the end-to-end test of the whole loop: real API, store, Evidently, MLflow, PyTorch
and the retrain child process. CI runs the fast variant."""
from __future__ import annotations

import pytest

from monitor.demo import DemoPlan, demo_config, prepare_home, run_demo
from monitor.errors import UserInputError
from tests.support.services import free_port


@pytest.mark.slow
def test_demo_detects_drift_retrains_promotes_and_recovers(tmp_path):
    plan = DemoPlan.fast()
    home = tmp_path / "demo"
    prepare_home(home)
    cfg = demo_config(home, free_port(), plan)
    lines: list[str] = []
    result = run_demo(cfg, plan, echo=lines.append)

    def opened(row):
        return any(" opened:" in e for e in row.events)

    # No alert while the labelled part of the window is from before the drift.
    before = [r for r in result.timeline if r.labelled_tick is None or r.labelled_tick < plan.ticks_before]
    assert before and not any(opened(r) for r in before), [r.events for r in before]
    # An alert after it, a promoted version, and traffic served by the new champion.
    after = [r for r in result.timeline if r.labelled_tick is not None and r.labelled_tick >= plan.ticks_before]
    assert any(opened(r) for r in after)
    assert result.promoted_versions and result.final_champion != result.baseline_version
    assert any(r.served_by == result.final_champion for r in result.timeline)
    # The drop was real, and accuracy recovered to within 2 points of the level before the drift.
    worst = min(r.accuracy for r in after if r.accuracy is not None)
    assert worst < result.pre_drift_accuracy - 0.03
    assert result.recovered_accuracy is not None
    assert result.recovered_accuracy >= result.pre_drift_accuracy - 0.02, (result.pre_drift_accuracy,
                                                                           result.recovered_accuracy)
    # The covariate drift shows in the drift share once drifted rows are in the window.
    assert max(r.drift_share or 0 for r in after) > 0
    # What a person reads: the timeline and where to look next.
    text = "\n".join(lines)
    assert "mlflow ui --backend-store-uri" in text and "docker compose up" in text
    assert (home / "reports").is_dir() and any((home / "reports").glob("*.html"))


def test_prepare_home_refuses_a_folder_it_did_not_make(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(UserInputError, match="not a driftloop demo folder"):
        prepare_home(tmp_path)
    assert (tmp_path / "precious.txt").exists()


def test_prepare_home_empties_its_own_folder(tmp_path):
    home = tmp_path / "demo"
    prepare_home(home)
    (home / "old.db").write_text("x")
    prepare_home(home)
    assert not (home / "old.db").exists() and (home / ".driftloop-demo").exists()
