"""What the controller did is a kind and its data; the sentence people read is made from them."""
from __future__ import annotations

from monitor.daemon.decisions.actions import Action, ActionKind, StartKind
from monitor.daemon.decisions.kinds import State


def test_every_kind_has_its_sentence():
    for kind in ActionKind:
        assert Action(kind, "inc-1", State.FIRING, progress=(1, 2), detail="why").describe()


def test_the_sentence_carries_the_retrain_and_its_reason():
    started = Action(ActionKind.OPENED, "inc-1", State.FIRING, retrain=StartKind.STARTED, attempt_id="att-1",
                     detail="retrain att-1 started")
    assert started.started and str(started) == "opened incident inc-1; retrain att-1 started"
    wait = Action(ActionKind.STILL_BREACHING, "inc-1", State.WAITING, retrain=StartKind.WAITING,
                  detail="waiting for 300 more labelled rows")
    assert not wait.started
    assert str(wait) == "incident inc-1 (waiting) still breaching; waiting for 300 more labelled rows"
    off = Action(ActionKind.OPENED, "inc-1", State.FIRING, detail="no retrain: alerts.retrain_on_drift is off")
    assert str(off) == "opened incident inc-1 (no retrain: alerts.retrain_on_drift is off)"
    assert str(Action(ActionKind.HEALTHY_PROGRESS, "inc-1", State.PROMOTED, progress=(1, 3))) == \
        "incident inc-1: healthy 1/3"
