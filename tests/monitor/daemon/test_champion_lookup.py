"""A follower runs no checks, so nothing asked the registry which version is champion after its
start: another daemon's promotion was not seen (rows sent to it without ``model_version`` were
stored as the old version for as long as it ran). ``ChampionCache.recent_version`` answers at once
and asks again in the background once its answer is older than the age given.

The registry boundary is the injected lookup (``current_version``); the cache is the real one."""
from __future__ import annotations

import time

from monitor.daemon.retraining.champion import ChampionCache
from monitor.errors import RegistryError


def _until(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_a_stale_answer_is_looked_up_again_in_the_background():
    alias = {"version": "1", "fail": False}
    asked: list[float] = []

    def lookup() -> str | None:
        asked.append(time.monotonic())
        if alias["fail"]:
            raise RegistryError("MLflow does not answer")
        return alias["version"]

    cache = ChampionCache(load=lambda: None, current_version=lookup)  # type: ignore[arg-type,return-value]
    assert cache.recent_version(0.2) in (None, "1")   # never looked up: answers at once, asks behind
    assert _until(lambda: cache.last_version == "1")
    alias["version"] = "2"                            # another daemon promotes
    assert cache.recent_version(60) == "1" and len(asked) == 1  # young enough: no lookup
    time.sleep(0.25)
    assert cache.recent_version(0.2) in ("1", "2")    # stale: answers at once, asks behind
    assert _until(lambda: cache.last_version == "2") and len(asked) == 2
    alias["fail"] = True
    time.sleep(0.25)
    for _ in range(50):                               # many callers, one lookup in flight at a time
        cache.recent_version(0.2)
    assert _until(lambda: len(asked) >= 3)
    time.sleep(0.1)
    assert cache.last_version == "2"                  # a registry that does not answer keeps the last
    assert len(asked) <= 4
