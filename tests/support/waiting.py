"""One way for a test to wait for something that happens in another thread or process.

A test that sleeps a fixed time and hopes is slow when the machine is idle and flaky when it is
busy; a hand-rolled poll loop that forgets to assert at the end passes without its condition.
``wait_until`` polls, returns the first truthy value, and fails with a message saying what did not
happen (the message may be a callable, so a log tail is read only on failure).
"""
from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float = 10.0, interval: float = 0.05,
               message: str | Callable[[], str] = "", *,
               ignoring: tuple[type[BaseException], ...] = ()) -> T:
    """Call ``predicate`` every ``interval`` seconds until it returns something truthy; return it.

    Raises ``AssertionError`` with ``message`` after ``timeout`` seconds. Exceptions of the types in
    ``ignoring`` (e.g. ``httpx.HTTPError`` while a server starts) count as "not yet"; any other
    exception propagates at once, so a predicate can fail early (``assert proc.poll() is None``).
    The predicate is called at least once, and once more at the deadline.
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        expired = time.monotonic() >= deadline
        try:
            value = predicate()
        except ignoring as exc:
            last_error = exc
        else:
            if value:
                return value
        if expired:
            text = message() if callable(message) else message
            detail = f" (last error: {last_error!r})" if last_error is not None else ""
            raise AssertionError(f"not within {timeout:g} s: {text or getattr(predicate, '__name__', 'condition')}"
                                 f"{detail}")
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
