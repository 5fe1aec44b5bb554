"""Start-up recovery: settle what a previous daemon left half done.

- an attempt still ``running``: its child is stopped if it somehow still runs (it normally
  stops itself within a second of losing its parent), then the attempt is settled against the
  registry: promoted if a version of its incident, registered after it began, is champion;
  failed otherwise (the incident is retried by the next breaching check, after the cooldown);
- an incident ``retraining`` with no running attempt (the daemon died between the two
  writes) is marked failed;
- a champion review's incident left open (``monitor.daemon.review``) is resolved;
- the alert policy's streaks are replayed from the latest checks, so "sustained for N windows"
  counts windows from before the restart.
"""
from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

from monitor.daemon import review
from monitor.daemon.controller import Controller
from monitor.daemon.incidents import TransitionError
from monitor.daemon.launcher import WORKER_MODULE, ChildResult

log = logging.getLogger(__name__)


def _is_our_worker(pid: int, attempt_id: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return WORKER_MODULE in cmdline and attempt_id in cmdline


def _stop_orphan(pid: int, attempt_id: str, grace: float = 10.0) -> None:
    if not _is_our_worker(pid, attempt_id):
        return
    log.warning("retrain worker %s (pid %d) outlived its daemon; stopping it", attempt_id, pid)
    try:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _is_our_worker(pid, attempt_id):
            time.sleep(0.1)
        if _is_our_worker(pid, attempt_id):
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def recover(ctl: Controller) -> list[str]:
    """Settle leftovers; returns one line per thing done (also logged)."""
    done: list[str] = []
    with ctl.lock:
        attempt = ctl.attempts.running()
        if attempt is not None:
            if attempt.pid:
                _stop_orphan(attempt.pid, attempt.id)
            ctl.settle(attempt, ChildResult(None, error="the daemon stopped while this retrain was running"))
            settled = ctl.attempts.get(attempt.id)
            done.append(f"retrain {attempt.id} of incident {attempt.incident_id} settled as {settled.status}")
        done += review.recover(ctl)  # a champion review killed mid-way: its incident resolved, not retried
        for incident in ctl.incidents.open_incidents():
            if incident.state == "retraining" and ctl.attempts.running() is None:
                try:
                    ctl.incidents.transition(incident.id, "failed", "the daemon stopped before the retrain started")
                    done.append(f"incident {incident.id} was retraining without a worker: marked failed")
                except TransitionError as exc:
                    log.warning("%s", exc)
        replay = ctl.cfg.alerts.sustained_windows + ctl.cfg.alerts.healthy_windows
        for obs in ctl.checklog.recent_observations(replay):
            ctl.policy.observe(obs)
    for line in done:
        log.warning("recovery: %s", line)
    return done
