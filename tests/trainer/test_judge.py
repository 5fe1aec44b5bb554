"""The judge (trainer/judge.py): ordered gates, each a typed verdict, and the decision computed from
the verdicts, on real figures, real floors, a real LiveComparison and real config sections."""
import dataclasses

import pytest

from monitor.config import GateConfig, MetricRule
from trainer.gate import Floors
from trainer.judge import Evidence, GateName, ReasonKind, Ruling, run_gates
from trainer.live import LiveComparison

GOOD = Floors(accuracy_lower=0.85, majority_rate=0.6, auc_lower=0.8, accuracy_upper=0.92)


def evidence(**over) -> Evidence:
    base = Evidence(task="binary", gate=GateConfig(), shadow_windows=0,
                    challenger={"accuracy": 0.90, "roc_auc": 0.93}, champion={"accuracy": 0.80, "roc_auc": 0.90},
                    challenger_reference=0.88, champion_reference=0.89, floors=GOOD, auc_noise=0.0,
                    concept_holds=True, challenger_rules={"recall": 0.8}, champion_rules={"recall": 0.8}, rules=[],
                    rules_mode="absolute", deployed={"form": "onnx-int8", "size_bytes": 2_000_000, "p99_1_ms": 0.5},
                    live=LiveComparison("1", unavailable="the window carries no served scores"), version="2",
                    champion_version="1", current_champion=lambda: "1")
    return dataclasses.replace(base, **over)


def test_a_better_challenger_passes_every_gate_and_the_reasons_say_why_yes():
    j = run_gates(evidence())
    assert j.ruling is Ruling.PROMOTED and j.promote
    assert [v.gate for v in j.verdicts] == list(GateName)
    assert all(v.passed for v in j.verdicts)
    assert j.verdict(GateName.FLOORS_AND_GAIN).kind is ReasonKind.BETTER
    assert j.verdict(GateName.COST).kind is ReasonKind.NO_COST_LIMIT
    assert j.reasons == list(j.verdict(GateName.FLOORS_AND_GAIN).details)  # the live line: none (unavailable)


def test_evidence_gates_all_report_and_acting_gates_do_not_run_after_a_failure():
    rule = MetricRule(metric="recall", drop=0.05)
    j = run_gates(evidence(challenger={"accuracy": 0.80, "roc_auc": 0.90}, rules=[rule],
                           challenger_rules={"recall": 0.6}, gate=GateConfig(max_model_mb=1.0)))
    assert j.ruling is Ruling.REJECTED
    assert [(v.gate, v.passed, v.kind) for v in j.verdicts] == [
        (GateName.FLOORS_AND_GAIN, False, ReasonKind.NOT_BETTER), (GateName.RULE_METRICS, False, ReasonKind.RULE_WORSE),
        (GateName.COST, False, ReasonKind.TOO_COSTLY)]
    assert j.reasons == [line for v in j.verdicts for line in v.details]


def test_a_passing_challenger_too_costly_is_refused_on_cost_alone():
    j = run_gates(evidence(gate=GateConfig(max_latency_ms=0.1)))
    assert j.ruling is Ruling.REJECTED
    failed = [v for v in j.verdicts if not v.passed]
    assert [(v.gate, v.kind, v.data["max_latency_ms"]) for v in failed] == [(GateName.COST, ReasonKind.TOO_COSTLY,
                                                                              0.1)]
    assert j.reasons == list(failed[0].details)


def test_a_required_live_win_without_a_comparison_is_not_won():
    j = run_gates(evidence(gate=GateConfig(requires_live_win=True)))
    live = j.verdict(GateName.LIVE_AB)
    assert j.ruling is Ruling.REJECTED and live.kind is ReasonKind.LIVE_NOT_WON
    assert live.data == {"wins": False, "required": True, "unavailable": "the window carries no served scores"}
    assert j.verdict(GateName.SHADOW_HOLD) is None  # acting gates stop at the first failure


def test_a_passing_challenger_with_shadow_windows_is_held_not_rejected():
    j = run_gates(evidence(shadow_windows=3))
    held = j.verdict(GateName.SHADOW_HOLD)
    assert j.ruling is Ruling.SHADOW and not j.promote
    assert (held.passed, held.kind, held.data["windows"], held.data["version"]) == (
        False, ReasonKind.HELD_IN_SHADOW, 3, "2")
    assert held.data["passed"] == list(j.verdict(GateName.FLOORS_AND_GAIN).details)
    assert j.verdict(GateName.ALIAS) is None


def test_the_champion_moved_meanwhile_is_not_clobbered():
    j = run_gates(evidence(current_champion=lambda: "5"))
    alias = j.verdict(GateName.ALIAS)
    assert j.ruling is Ruling.REJECTED
    assert (alias.kind, alias.data) == (ReasonKind.CHAMPION_MOVED, {"before": "1", "current": "5"})
    assert j.reasons == alias.lines


@pytest.mark.parametrize("task, challenger, champion", [
    ("regression", {"mae": 5.0, "rmse": 7.0}, {"mae": 10.0, "rmse": 12.0})])
def test_the_gate_settings_come_from_training_gate(task, challenger, champion):
    from trainer.gate import RegressionFloors
    strict = GateConfig(min_mae_gain=0.6)
    e = evidence(task=task, challenger=challenger, champion=champion, challenger_reference=5.0,
                 champion_reference=5.0, floors=RegressionFloors(0.9, 0.8))
    assert run_gates(e).ruling is Ruling.PROMOTED
    assert run_gates(dataclasses.replace(e, gate=strict)).verdict(GateName.FLOORS_AND_GAIN).kind is \
        ReasonKind.NOT_BETTER


def test_a_verdict_is_frozen_and_serialises_for_the_daemon():
    v = run_gates(evidence()).verdicts[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.passed = False  # type: ignore[misc]
    assert v.to_dict()["gate"] == "floors_and_gain" and v.to_dict()["kind"] == "better"
