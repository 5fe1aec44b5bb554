"""The reference level across the moment a retrain child has moved the alias but the daemon has
not yet settled its attempt (an outside evaluation, small bursty windows: a check in that gap saw
champion v2 with no promoted attempt naming it, took it for a champion set from outside the loop and
reset the level from v1's 0.834 to v2's 0.741, measured on 108 held-out rows)."""

from __future__ import annotations

from types import SimpleNamespace

from monitor.daemon.state.attempts import AttemptStore
from monitor.daemon.state.levels import ReferenceLevels


def _check(version: str, accuracy: float) -> SimpleNamespace:
    result = SimpleNamespace(baseline_accuracy=accuracy, baseline_roc_auc=0.9, baseline_mae=None)
    return SimpleNamespace(champion_version=version, result=result)


def test_a_check_between_the_alias_move_and_the_settlement_keeps_the_level(engine, clock):
    levels, attempts = ReferenceLevels(engine, "demo"), AttemptStore(engine, "demo", clock)
    assert levels.current(_check("1", 0.834)).accuracy == 0.834
    attempt = attempts.begin("inc-1", "alert", rows=360)
    # The child promoted v2 (the alias moved); its attempt is still running in the store.
    assert levels.current(_check("2", 0.741)).accuracy == 0.834
    assert levels.read()["reference_version"] == 1
    attempts.finish(attempt.id, "promoted", challenger_version="2", champion_version="1")
    assert levels.current(_check("2", 0.741)).accuracy == 0.834  # promoted by the loop: the level stays


def test_a_champion_set_from_outside_still_resets_the_level(engine, clock):
    levels = ReferenceLevels(engine, "demo")
    levels.current(_check("1", 0.834))
    assert levels.current(_check("2", 0.741)).accuracy == 0.741  # no retrain of ours: a person chose it
    assert levels.read()["reference_version"] == 2
