import math

import pytest

from trainer.gate import decide

MARGINS = {"min_accuracy_gain": 0.01, "min_auc_gain": 0.0, "reference_floor": 0.15}


def m(acc, auc):
    return {"accuracy": acc, "roc_auc": auc}


@pytest.mark.parametrize("challenger, champion, ref, promote, why", [
    (m(0.85, 0.92), m(0.80, 0.88), (0.84, 0.86), True, "accuracy +0.0500"),
    (m(0.805, 0.95), m(0.80, 0.88), (0.86, 0.86), False, "accuracy gain +0.0050 < required 0.0100"),
    (m(0.85, 0.87), m(0.80, 0.88), (0.86, 0.86), False, "ROC AUC gain -0.0100 < required 0.0000"),
    (m(0.85, 0.92), m(0.80, 0.88), (0.60, 0.86), False, "forgets the reference data"),
    (m(0.85, 0.92), m(0.80, 0.88), (0.72, 0.86), True, "reference accuracy loss 0.1400"),
    (m(0.80, math.nan), m(0.80, 0.88), (0.86, 0.86), False, "undefined"),
])
def test_decision_table(challenger, champion, ref, promote, why):
    decision = decide(challenger, champion, ref[0], ref[1], **MARGINS)
    assert decision.promote is promote
    assert any(why in r for r in decision.reasons), decision.reasons


def test_zero_margins_still_need_a_strict_improvement():
    zero = {**MARGINS, "min_accuracy_gain": 0.0}
    tie = decide(m(0.8, 0.9), m(0.8, 0.9), 0.8, 0.8, **zero)
    assert not tie.promote and "not better than the champion on accuracy or ROC AUC" in tie.reasons
    assert decide(m(0.8, 0.91), m(0.8, 0.9), 0.8, 0.8, **zero).promote


def test_every_failed_condition_is_reported():
    d = decide(m(0.70, 0.80), m(0.80, 0.88), 0.5, 0.86, **MARGINS)
    assert not d.promote and len(d.reasons) == 4


def test_a_gain_of_exactly_the_margin_passes_despite_float_rounding():
    # 0.57 - 0.56 is 0.00999... in floating point: 9 more right answers of 900 must still pass 0.01.
    decision = decide(m(0.57, 0.90), m(0.56, 0.90), 0.71, 0.86, **MARGINS)
    assert decision.promote is True, decision.reasons


# ---- absolute floors and concept-aware forgetting (issue 16) --------------------------------
import numpy as np  # noqa: E402

from trainer.gate import Floors, floors_of  # noqa: E402


def test_less_broken_is_not_good_enough():
    """After a label reversal: 4.7 % accuracy beats the champion's 0.3 %, and is still refused."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 1000)
    scores = np.where(y == 1, 0.2, 0.8) + rng.normal(0, 0.05, 1000)  # confidently wrong
    floors = floors_of(y, scores.clip(0, 1), 0.5, 0.95)
    decision = decide(m(0.047, 0.25), m(0.003, 0.01), 0.9, 0.9, **MARGINS, floors=floors, concept_holds=False)
    assert not decision.promote
    assert any("ROC AUC lower bound" in r and "not above 0.5" in r for r in decision.reasons)
    assert any("below the majority-class rate" in r for r in decision.reasons)


def test_floors_of_a_good_model_pass():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 800)
    scores = np.where(y == 1, 0.8, 0.2) + rng.normal(0, 0.2, 800)
    floors = floors_of(y, scores.clip(0, 1), 0.5, 0.95)
    assert floors.auc_lower > 0.9 and floors.accuracy_lower > floors.majority_rate
    assert decide(m(0.9, 0.95), m(0.8, 0.9), 0.85, 0.86, **MARGINS, floors=floors).promote


def test_forgetting_is_limited_only_while_the_old_concept_holds():
    good = Floors(accuracy_lower=0.88, majority_rate=0.55, auc_lower=0.93)
    held = decide(m(0.91, 0.98), m(0.5, 0.5), 0.05, 0.95, **MARGINS, floors=good, concept_holds=True)
    assert not held.promote and any("forgets the reference data" in r for r in held.reasons)
    changed = decide(m(0.91, 0.98), m(0.5, 0.5), 0.05, 0.95, **MARGINS, floors=good, concept_holds=False)
    assert changed.promote and "not limited: the champion's concept no longer holds" in changed.reasons[0]


def test_a_good_ranker_on_imbalanced_rows_is_not_refused_for_accuracy_near_the_majority_rate():
    """10 % positives: a challenger that ranks well (ROC AUC ~0.9) has accuracy near the 90 % majority
    rate, which 600 held-out rows cannot prove it beats; it is good, and promoted when better."""
    rng = np.random.default_rng(2)
    y = (rng.uniform(size=600) < 0.1).astype(int)
    scores = 1 / (1 + np.exp(-(2.2 * (2 * y - 1) * rng.uniform(0.2, 1.0, 600) + rng.normal(-2.2, 0.8, 600))))
    floors = floors_of(y, scores, 0.5, 0.95)
    acc = float(((scores > 0.5) == y).mean())
    assert floors.auc_lower > 0.8 and floors.accuracy_lower < floors.majority_rate <= floors.accuracy_upper
    decision = decide(m(acc, 0.9), m(acc - 0.05, 0.6), 0.8, 0.8, **MARGINS, floors=floors, concept_holds=False)
    assert decision.promote, decision.reasons


def test_a_roc_auc_loss_within_the_paired_test_noise_is_not_worse():
    """A prior shift: the challenger fixes the threshold (+15 points of accuracy) with the same
    ranking; its ROC AUC differs by noise. "Not worse" (min_auc_gain 0) reads "not significantly
    worse" by the paired DeLong margin; a real loss, or a required gain, still refuses."""
    fixed, broken = m(0.90, 0.9198), m(0.75, 0.92)
    assert not decide(fixed, broken, 0.9, 0.9, **MARGINS).promote                  # strict: -0.0002 refuses
    assert decide(fixed, broken, 0.9, 0.9, **MARGINS, auc_noise=0.004).promote      # within the noise
    worse = decide(m(0.90, 0.89), broken, 0.9, 0.9, **MARGINS, auc_noise=0.004)
    assert not worse.promote and any("ROC AUC gain -0.0300" in r for r in worse.reasons)
    need = decide(fixed, broken, 0.9, 0.9, **{**MARGINS, "min_auc_gain": 0.01}, auc_noise=0.004)
    assert not need.promote


def test_auc_noise_is_the_paired_delong_margin_on_the_rows():
    from monitor.paired import paired_delong
    from trainer.gate import auc_noise
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 2000)
    champion = y + rng.normal(0, 1.0, 2000)
    challenger = champion + rng.normal(0, 0.3, 2000)               # nearly the same ranking
    noise = auc_noise("binary", y, champion, challenger, 0.95)
    found = paired_delong(y == 1, champion, challenger)
    assert noise == pytest.approx(1.6449 * math.sqrt(found.variance), rel=1e-3) and 0 < noise < 0.02
    more = auc_noise("binary", y[:300], champion[:300], challenger[:300], 0.95)
    assert more > noise                                              # fewer rows, wider margin
    proba = np.column_stack([1 - champion / 4, champion / 8, champion / 8]).clip(0.01, 1)
    assert auc_noise("multiclass", rng.integers(0, 3, 2000), proba, proba[:, ::-1], 0.95) > 0
    assert auc_noise("binary", np.ones(50), champion[:50], challenger[:50], 0.95) == 0.0   # one class
    assert auc_noise("regression", y, champion, challenger, 0.95) == 0.0


# -- the significant-gain rule (training.gate.significant_gain): the bar is what the evidence attains ---

from monitor.config import GateConfig  # noqa: E402
from trainer.gate import decide_regression, significant_gain  # noqa: E402


def _paired_binary(n: int, champion_right: int, only_challenger: int, only_champion: int):
    """Labels and two models' scores on ``n`` rows: both right on ``champion_right - only_champion``
    rows, only the challenger on ``only_challenger``, only the champion on ``only_champion``."""
    y = np.ones(n, dtype=np.int64)
    champion = np.full(n, 0.2)                 # wrong everywhere...
    champion[:champion_right] = 0.8            # ...except its right rows
    challenger = champion.copy()
    challenger[:only_champion] = 0.2           # the challenger misses some the champion had
    challenger[champion_right:champion_right + only_challenger] = 0.8  # and gets new ones
    return y, champion, challenger


def test_a_small_proven_gain_below_the_level_passes_and_noise_does_not():
    gate = GateConfig()
    y, champion, challenger = _paired_binary(10_000, 9_000, only_challenger=80, only_champion=20)  # +0.006
    why = significant_gain("binary", y, champion, challenger, 0.90, 0.93, gate, 0.5)
    assert why is not None and "McNemar" in why and "below the reference level 0.93" in why
    figures = ({"accuracy": 0.906, "roc_auc": 0.9}, {"accuracy": 0.900, "roc_auc": 0.9})
    assert decide(*figures, 0.9, 0.9, min_accuracy_gain=0.01, min_auc_gain=0.0, reference_floor=0.15).promote is False
    passed = decide(*figures, 0.9, 0.9, min_accuracy_gain=0.01, min_auc_gain=0.0, reference_floor=0.15,
                    significant=why)
    assert passed.promote and "under min_accuracy_gain 0.0100 but significant" in passed.reasons[0]
    # At its level (0.89 < 0.90) the champion keeps the fixed margin: no churn on a healthy model.
    assert significant_gain("binary", y, champion, challenger, 0.90, 0.89, gate, 0.5) is None
    # Noise: 55 against 45 discordant rows proves nothing.
    y, champion, challenger = _paired_binary(10_000, 9_000, only_challenger=55, only_champion=45)
    assert significant_gain("binary", y, champion, challenger, 0.90, 0.93, gate, 0.5) is None
    # Switched off: never.
    y, champion, challenger = _paired_binary(10_000, 9_000, only_challenger=80, only_champion=20)
    assert significant_gain("binary", y, champion, challenger, 0.90, 0.93,
                            GateConfig(significant_gain=False), 0.5) is None


def test_a_proven_mae_fall_under_the_margin_passes_below_the_level():
    rng = np.random.default_rng(3)
    y = rng.normal(100, 5, 5_000)
    champion = y + rng.normal(0, 4, y.size)
    challenger = y + (champion - y) * 0.99    # every error 1 % smaller: a 1 % MAE fall, proven
    mae = float(np.abs(champion - y).mean())
    why = significant_gain("regression", y, champion, challenger, mae, mae * 0.9, GateConfig(), 0.5)
    assert why is not None and "paired t" in why
    champ = {"mae": mae, "rmse": float(np.sqrt(((champion - y) ** 2).mean()))}
    chall = {"mae": float(np.abs(challenger - y).mean()), "rmse": float(np.sqrt(((challenger - y) ** 2).mean()))}
    assert not decide_regression(chall, champ, 1.0, 1.0, min_mae_gain=0.02, reference_floor=0.15).promote
    assert decide_regression(chall, champ, 1.0, 1.0, min_mae_gain=0.02, reference_floor=0.15,
                             significant=why).promote
    # The champion already at (below) its level's MAE: the fixed 2 % applies.
    assert significant_gain("regression", y, champion, challenger, mae, mae * 1.1, GateConfig(), 0.5) is None


def test_a_proven_roc_auc_gain_below_its_level_passes_while_the_accuracy_holds():
    """A feature sent in other units breaks a model's ranking while its served labels barely move: the
    incident is a ROC AUC drop, and a challenger that proves the ROC AUC back (DeLong) while the
    champion sits below that level is promoted without an accuracy step the champion never lost."""
    gate = GateConfig()
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 1350)
    z = (2 * y - 1) + rng.normal(0, 1.0, len(y))
    challenger = 1 / (1 + np.exp(-2 * z))                      # ranks by the evidence
    u = rng.uniform(0, 0.5, len(y))
    champion = np.where(z > 0, 0.5 + u, 0.5 - u)               # the same labels, a ranking of noise
    assert ((champion >= 0.5) == (challenger >= 0.5)).all()
    why = significant_gain("binary", y, champion, challenger, 0.84, 0.842, gate, 0.5, levels={"roc_auc": 0.92})
    assert why is not None and "DeLong" in why and "roc_auc" in why and "reference level 0.92" in why
    # The accuracy alone proves nothing (the same labels), and without the ROC AUC level nothing is proven.
    assert significant_gain("binary", y, champion, challenger, 0.84, 0.842, gate, 0.5) is None
    figures = ({"accuracy": 0.841, "roc_auc": 0.915}, {"accuracy": 0.841, "roc_auc": 0.866})
    kw = dict(min_accuracy_gain=0.01, min_auc_gain=0.0, reference_floor=0.15)
    refused = decide(*figures, 0.9, 0.9, **kw)
    assert not refused.promote and "accuracy gain +0.0000 < required 0.0100" in refused.reasons[0]
    assert decide(*figures, 0.9, 0.9, **kw, significant=why).promote
    # ...as long as the accuracy does not fall by the margin.
    worse = decide({"accuracy": 0.821, "roc_auc": 0.915}, figures[1], 0.9, 0.9, **kw, significant=why)
    assert not worse.promote and "accuracy gain -0.0200 < required -0.0100" in worse.reasons[0]
