"""The retrain's judge: an ordered list of gates, each returning a typed :class:`Verdict`, and the
decision computed from the verdicts (not carried in variables each gate overwrites).

The gates, in order (``training.gate`` holds their settings):

1. ``floors_and_gain`` — the challenger is good (floors) and better than the champion by the margins
   without forgetting the reference while the old concept holds (trainer/gate.py);
2. ``rule_metrics`` — no ``alerts.rules`` metric worse than the champion's by the rule's drop
   (trainer/rule_gate.py);
3. ``cost`` — its exported form fits ``gate.max_latency_ms`` / ``gate.max_model_mb``;
4. ``live_ab`` — with ``gate.requires_live_win``, it wins the A/B on the live rows the champion
   served (trainer/live.py); otherwise the comparison is only reported;
5. ``shadow_hold`` — with ``training.shadow.windows``, a challenger that passed is held in shadow
   (trainer/shadow.py) instead of promoted;
6. ``alias`` — compare-and-set: the champion must still be the one the retrain started from.

Gates 1-3 weigh evidence and always run, so every failed condition is reported together; 4-6 act
on a challenger that passed everything before them and run only then. The outcome: ``promoted``
when every verdict passed, ``shadow`` when the only one that did not is the shadow hold, else
``rejected``. The reasons recorded (MLflow tags, the daemon's result) are the failed verdicts'
messages, or, when none failed, the passed ones' (why yes).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from monitor.config import GateConfig, MetricRule
from trainer.gate import Floors, RegressionFloors, cost_refusals, judge
from trainer.rule_gate import rule_regressions

if TYPE_CHECKING:
    from trainer.live import LiveComparison


class GateName(StrEnum):
    FLOORS_AND_GAIN = "floors_and_gain"
    RULE_METRICS = "rule_metrics"
    COST = "cost"
    LIVE_AB = "live_ab"
    SHADOW_HOLD = "shadow_hold"
    ALIAS = "alias"


class ReasonKind(StrEnum):
    BETTER = "better"                    # good, better by the margins, not forgetting
    NOT_BETTER = "not_better"            # a floor, a margin or the forgetting bound failed (details)
    RULES_HOLD = "rules_hold"
    RULE_WORSE = "rule_worse"            # worse on an alerts.rules metric (details, one per rule)
    NO_COST_LIMIT = "no_cost_limit"
    FITS = "fits"
    TOO_COSTLY = "too_costly"            # too slow, too big, or nothing exported to measure (details)
    LIVE_WIN = "live_win"
    LIVE_REPORTED = "live_reported"      # compared on live traffic, not required to win
    LIVE_NOT_WON = "live_not_won"        # required to win and did not (or could not be compared)
    NO_SHADOW = "no_shadow"
    HELD_IN_SHADOW = "held_in_shadow"
    CHAMPION_UNCHANGED = "champion_unchanged"
    CHAMPION_MOVED = "champion_moved"    # a rollback or manual edit during the retrain: not clobbered


class Ruling(StrEnum):
    PROMOTED = "promoted"
    REJECTED = "rejected"
    SHADOW = "shadow"


@dataclass(frozen=True)
class Verdict:
    """One gate's answer. ``details`` are the sub-conditions as the gate's own module words them
    (trainer/gate.py, rule_gate.py, live.py); :attr:`message` renders the rest from ``data``."""
    gate: GateName
    passed: bool
    kind: ReasonKind
    data: Mapping[str, Any] = field(default_factory=dict)
    details: tuple[str, ...] = ()

    @property
    def lines(self) -> list[str]:
        """What this verdict adds to the recorded reasons (none for a quiet pass)."""
        if self.kind is ReasonKind.HELD_IN_SHADOW:
            return [f"held in shadow: challenger v{self.data['version']} scores {self.data['windows']} check "
                    "window(s) of live traffic before it can become champion (training.shadow.windows); passed "
                    f"the gate: {'; '.join(self.data['passed'])}"]
        if self.kind is ReasonKind.CHAMPION_MOVED:
            return [f"champion changed during retraining (v{self.data['before']} -> v{self.data['current']}); "
                    "not promoted"]
        return list(self.details)

    @property
    def message(self) -> str:
        return "; ".join(self.lines) or f"{self.gate}: {self.kind}"

    def to_dict(self) -> dict[str, Any]:
        return {"gate": str(self.gate), "passed": self.passed, "kind": str(self.kind), "message": self.message,
                "data": dict(self.data)}


@dataclass
class Evidence:
    """What the gates weigh: the challenger and champion on the same held-out recent rows, and what
    was measured of the registered challenger (its exported form, the live comparison)."""
    task: str
    gate: GateConfig                           # training.gate
    shadow_windows: int
    challenger: dict[str, float]
    champion: dict[str, float]
    challenger_reference: float                # accuracy (MAE) on the champion's reference sample
    champion_reference: float
    floors: Floors | RegressionFloors
    auc_noise: float
    concept_holds: bool
    challenger_rules: dict[str, float]         # what alerts.rules compare, on the held-out rows
    champion_rules: dict[str, float]
    rules: Sequence[MetricRule]
    rules_mode: str
    deployed: dict[str, Any] | None            # the exported form that would be served (None: none published)
    live: LiveComparison
    version: str                               # the registered challenger
    champion_version: str                      # the champion the retrain started from
    current_champion: Callable[[], str | None]  # reads the alias now (the compare of compare-and-set)
    # Why a gain under the fixed margin counts (trainer/gate.py significant_gain), or None.
    significant: str | None = None


def floors_and_gain(e: Evidence) -> Verdict:
    decision = judge(e.task, e.challenger, e.champion, e.challenger_reference, e.champion_reference, e.gate,
                     floors=e.floors, concept_holds=e.concept_holds, auc_noise=e.auc_noise,
                     significant=e.significant)
    return Verdict(GateName.FLOORS_AND_GAIN, decision.promote,
                   ReasonKind.BETTER if decision.promote else ReasonKind.NOT_BETTER,
                   {"concept_holds": e.concept_holds}, tuple(decision.reasons))


def rule_metrics(e: Evidence) -> Verdict:
    worse = rule_regressions(e.challenger_rules, e.champion_rules, e.rules, e.rules_mode)
    return Verdict(GateName.RULE_METRICS, not worse, ReasonKind.RULE_WORSE if worse else ReasonKind.RULES_HOLD,
                   {"rules": len(e.rules)}, tuple(worse))


def cost(e: Evidence) -> Verdict:
    limits = {"max_latency_ms": e.gate.max_latency_ms, "max_model_mb": e.gate.max_model_mb}
    if all(v is None for v in limits.values()):
        return Verdict(GateName.COST, True, ReasonKind.NO_COST_LIMIT)
    too_costly = cost_refusals(e.deployed, **limits)
    return Verdict(GateName.COST, not too_costly, ReasonKind.TOO_COSTLY if too_costly else ReasonKind.FITS,
                   {**limits, "deployed": e.deployed}, tuple(too_costly))


def live_ab(e: Evidence) -> Verdict:
    wins, why = e.live.verdict(1 - e.gate.confidence)
    data = {"wins": wins, "required": e.gate.requires_live_win, "unavailable": e.live.unavailable}
    if e.gate.requires_live_win:
        return Verdict(GateName.LIVE_AB, wins, ReasonKind.LIVE_WIN if wins else ReasonKind.LIVE_NOT_WON, data, (why,))
    return Verdict(GateName.LIVE_AB, True, ReasonKind.LIVE_REPORTED, data,
                   () if e.live.unavailable is not None else (why,))


def shadow_hold(e: Evidence, earlier: Sequence[Verdict]) -> Verdict:
    if e.shadow_windows <= 0:
        return Verdict(GateName.SHADOW_HOLD, True, ReasonKind.NO_SHADOW)
    passed = [line for v in earlier for line in v.lines]
    return Verdict(GateName.SHADOW_HOLD, False, ReasonKind.HELD_IN_SHADOW,
                   {"version": e.version, "windows": e.shadow_windows, "champion": e.champion_version,
                    "passed": passed})


def alias(e: Evidence) -> Verdict:
    current = e.current_champion()
    data = {"before": e.champion_version, "current": current}
    if current != e.champion_version:
        return Verdict(GateName.ALIAS, False, ReasonKind.CHAMPION_MOVED, data)
    return Verdict(GateName.ALIAS, True, ReasonKind.CHAMPION_UNCHANGED, data)


@dataclass(frozen=True)
class Judgement:
    verdicts: tuple[Verdict, ...]

    @property
    def ruling(self) -> Ruling:
        failed = [v for v in self.verdicts if not v.passed]
        if not failed:
            return Ruling.PROMOTED
        return Ruling.SHADOW if all(v.kind is ReasonKind.HELD_IN_SHADOW for v in failed) else Ruling.REJECTED

    @property
    def promote(self) -> bool:
        return self.ruling is Ruling.PROMOTED

    @property
    def reasons(self) -> list[str]:
        failed = [v for v in self.verdicts if not v.passed]
        return list(dict.fromkeys(line for v in (failed or self.verdicts) for line in v.lines))

    def verdict(self, gate: GateName) -> Verdict | None:
        return next((v for v in self.verdicts if v.gate is gate), None)


def run_gates(e: Evidence) -> Judgement:
    """The gates in order: the evidence gates all run; the acting ones only after every earlier pass."""
    verdicts = [floors_and_gain(e), rule_metrics(e), cost(e)]
    for acting in (live_ab, lambda ev: shadow_hold(ev, verdicts), alias):
        if not all(v.passed for v in verdicts):
            break
        verdicts.append(acting(e))
    return Judgement(tuple(verdicts))


def verdict_dicts(verdicts: Iterable[Verdict]) -> list[dict[str, Any]]:
    return [v.to_dict() for v in verdicts]
