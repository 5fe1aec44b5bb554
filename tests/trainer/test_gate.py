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
