"""Drift episodes: hysteresis on dataset drift, so one continuing drift is one incident.

Evidently's dataset-drift flag on a drift that goes on flickers from check to check (a window
just under ``drift.drift_share``, then over again). Judged check by check, every quiet window
resolved the drift incident and the next drifted one opened another (issue 34: one covariate
drift opened eight). A :class:`DriftLatch` turns the flag into *episodes*:

- an episode **starts** when ``k`` of the last ``n`` judged checks drifted (``alerts.drift_open_checks``
  of ``alerts.drift_open_window``; default ``alerts.sustained_windows`` in a row, today's rule);
- it **goes on** while drift comes back before ``m`` quiet checks in a row, counting its drifted
  checks (the incident's ``drifted_checks``);
- it **ends** after ``m`` judged checks in a row without drift (``alerts.drift_quiet_checks``):
  only then is a drift incident healthy.

A check whose drift was not judged (too few rows) changes nothing. Pure: no I/O, no clock.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class DriftEpisode:
    """What the latch says after one check."""

    active: bool = False         # an episode is on (started, not yet ended by quiet checks)
    onset: bool = False          # this check started it
    ended: bool = False          # this check ended it (the m-th quiet check in a row)
    drifted: bool = False        # this check drifted (judged)
    drifted_checks: int = 0      # drifted checks of the episode so far (the last one's, once ended)
    quiet: int = 0               # judged checks in a row without drift


class DriftLatch:
    """Start on ``k`` of ``n`` drifted checks, end after ``m`` quiet ones (module docstring)."""

    def __init__(self, open_checks: int = 1, open_window: int = 1, quiet_checks: int = 1):
        if not 1 <= open_checks <= open_window or quiet_checks < 1:
            raise ValueError(f"need 1 <= k <= n and m >= 1 (k={open_checks}, n={open_window}, m={quiet_checks})")
        self._k, self._m = open_checks, quiet_checks
        self._recent: deque[bool] = deque(maxlen=open_window)
        self._state = DriftEpisode()

    @property
    def state(self) -> DriftEpisode:
        return self._state

    def reset(self) -> None:
        """Forget the episode (a new champion is measured against its own reference)."""
        self._recent.clear()
        self._state = DriftEpisode()

    def observe(self, drifted: bool | None) -> DriftEpisode:
        """One check: drifted, quiet, or not judged (``None``: nothing changes)."""
        s = self._state
        if drifted is None:
            self._state = DriftEpisode(s.active, False, False, False, s.drifted_checks, s.quiet)
            return self._state
        self._recent.append(drifted)
        if drifted:
            if s.active:
                self._state = DriftEpisode(True, False, False, True, s.drifted_checks + 1, 0)
            elif sum(self._recent) >= self._k:
                self._state = DriftEpisode(True, True, False, True, sum(self._recent), 0)
            else:
                self._state = DriftEpisode(False, False, False, True, 0, 0)
            return self._state
        quiet = s.quiet + 1
        if s.active and quiet >= self._m:
            self._recent.clear()  # the next episode needs k fresh drifted checks
            self._state = DriftEpisode(False, False, True, False, s.drifted_checks, quiet)
        else:
            self._state = DriftEpisode(s.active, False, False, False, s.drifted_checks if s.active else 0, quiet)
        return self._state
