"""The one polling helper the tests share."""
import itertools
import time

import pytest

from tests.support.waiting import wait_until


def test_returns_the_first_truthy_value():
    calls = itertools.count()
    assert wait_until(lambda: [n] if (n := next(calls)) >= 3 else [], 5, 0.001) == [3]


def test_fails_with_the_message_after_the_timeout():
    asked = []

    def message() -> str:
        asked.append(1)
        return "the log tail"

    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"not within 0.2 s: the log tail"):
        wait_until(lambda: False, 0.2, 0.01, message)
    assert 0.2 <= time.monotonic() - started < 2 and asked == [1]
    assert wait_until(lambda: True, 1, 0.01, message) and asked == [1]  # read only on failure


def test_ignored_errors_are_not_yet_and_others_propagate():
    state = iter([ConnectionError("refused"), ConnectionError("refused"), "up"])

    def probe():
        value = next(state)
        if isinstance(value, Exception):
            raise value
        return value

    assert wait_until(probe, 5, 0.001, ignoring=(ConnectionError,)) == "up"
    with pytest.raises(AssertionError, match=r"last error: ConnectionError\('refused'\)"):
        wait_until(lambda: (_ for _ in ()).throw(ConnectionError("refused")), 0.05, 0.01, ignoring=(ConnectionError,))
    with pytest.raises(ValueError, match="boom"):
        wait_until(lambda: (_ for _ in ()).throw(ValueError("boom")), 5, 0.01)
