"""Which earlier champions a retrain tries (trainer/previous.py); the reinstatement itself runs
through the real loop in tests/monitor/daemon/test_recurring.py."""
from __future__ import annotations

from trainer.previous import candidates


def test_earlier_champions_are_tried_newest_first_without_the_current_one_or_repeats():
    assert candidates(["1", "2", "3", "4"], "4", 3) == ["3", "2", "1"]
    assert candidates(["1", "2", "1", "3"], "3", 5) == ["1", "2"]
    assert candidates(["1", "2", "3"], "2", 1) == ["3"]
    assert candidates(["1"], "1", 3) == [] and candidates(["1", "2"], "2", 0) == []
