"""The champion, cached by version: loading a model and its baseline from MLflow takes
seconds, asking which version the ``champion`` alias points at takes milliseconds.

After a promotion (or a ``driftloop rollback`` from another shell) the alias moves; the next
:meth:`ChampionCache.get` sees a different version and loads it, so the next check compares
against the new champion's baseline.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Callable

from monitor.config import DriftloopConfig
from monitor.errors import RegistryError

if TYPE_CHECKING:
    from trainer import Champion


log = logging.getLogger(__name__)


class NoChampionError(RegistryError):
    """The registry answered, and it has no champion (as opposed to not answering)."""


class ChampionCache:
    def __init__(self, load: Callable[[], Champion], current_version: Callable[[], str | None]):
        """``load()`` returns a trainer ``Champion`` (raises ``RegistryError`` without one);
        ``current_version()`` the version the alias points at now, or None without a champion."""
        self._load = load
        self._current_version = current_version
        self._cached: Champion | None = None
        self._lock = threading.Lock()
        self.last_version: str | None = None  # as of the latest lookup; for /metrics, which must not block
        self._looked_at: float | None = None   # time.monotonic() of the latest lookup
        self._refreshing = threading.Lock()    # held by the one background lookup in flight

    def version(self) -> str | None:
        self.last_version = self._current_version()
        self._looked_at = time.monotonic()
        return self.last_version

    def recent_version(self, max_age: float) -> str | None:
        """``last_version`` without waiting; when it is older than ``max_age`` seconds, one lookup
        starts in the background (for a follower, whose checks do not run: another daemon's promotion
        is seen within ``max_age`` plus a lookup). A registry that does not answer keeps the last."""
        looked = self._looked_at
        if (looked is None or time.monotonic() - looked > max_age) and self._refreshing.acquire(blocking=False):
            def refresh() -> None:
                try:
                    self.version()
                except Exception as exc:  # the checks and readiness report an unreachable registry
                    log.debug("champion lookup failed: %s", exc)
                    self._looked_at = time.monotonic()  # asked: the next try waits its age too
                finally:
                    self._refreshing.release()
            threading.Thread(target=refresh, name="driftloop-champion-lookup", daemon=True).start()
        return self.last_version

    def get(self) -> Champion:
        with self._lock:
            version = self.version()
            if version is None:
                self._cached = None
                raise NoChampionError("the registry has no champion yet")
            if self._cached is None or str(self._cached.version) != str(version):
                self._cached = self._load()
            return self._cached

    def invalidate(self, version: str | None = None) -> None:
        """Load again at the next ``get``; ``version``: the champion now (just promoted), known
        before the next lookup (what rows without a model_version are stored as)."""
        with self._lock:
            self._cached = None
            if version is not None:
                self.last_version = str(version)


def mlflow_alias_lookup(cfg: DriftloopConfig,
                        served: Callable[[], str | None] = lambda: None) -> Callable[[], str | None]:
    """``current_version`` for :class:`ChampionCache` that asks the MLflow registry, through the
    trainer's registry boundary: errors become ``RegistryError``, and HTTP timeouts and retries are
    bounded, so a tracking server that is down costs a check seconds, not minutes.
    A champion served before (the version this lookup last answered, else ``served()``, e.g. the
    check log's :meth:`~monitor.daemon.state.checklog.CheckLog.last_champion`) makes a vanished
    registry an error rather than silently recreated empty."""
    answered: list[str] = []

    def current() -> str | None:
        from trainer import registry as reg

        reg.check_reachable(cfg, answered[-1] if answered else served())
        # An explicit client only: a follower looks up in a thread, and session() would move MLflow's
        # process-wide tracking URI under whatever else runs in the process.
        with reg.bounded_http(cfg), reg.translating(cfg, "reading the champion alias"):
            version = reg.Registry(cfg).alias_version(reg.CHAMPION)
        if version is not None:
            answered[:] = [str(version)]
        return version
    return current
