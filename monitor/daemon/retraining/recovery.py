"""Recovery: settle what a previous leader left half done. Runs whenever this daemon becomes the
leader: at start-up on SQLite, and on PostgreSQL each time leader election picks it (a follower
taking over from a leader that died).

- an attempt still ``running``: its child is stopped if it somehow still runs here (it normally
  stops itself within half a second of losing its parent), then the attempt is settled from what
  the child left (:func:`monitor.daemon.retraining.failover.settle_dead_leaders_attempt`): its result file,
  or the registry (promoted if its version is champion, its recorded verdict if it got past the
  gate), else ``interrupted``, with any version it registered tagged ``driftloop.fate``;
- an incident whose latest attempt was interrupted is retried at once: an interruption is not a
  failure of training, so no cooldown and no back-off apply;
- an incident ``retraining`` with no running attempt (the daemon died between the two
  writes) is marked failed;
- a champion review's incident left open (``monitor.daemon.retraining.review``) is resolved;
- the alert policy's streaks are replayed from the latest checks, so "sustained for N windows"
  counts windows from before the restart.
"""
from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

from monitor.daemon.decisions.kinds import State
from monitor.daemon.decisions.lifecycle import Event
from monitor.daemon.retraining import review
from monitor.daemon.runtime.controller import Controller
from monitor.daemon.state.incidents import TransitionError
from monitor.daemon.retraining.failover import retry_interrupted, settle_dead_leaders_attempt
from monitor.daemon.retraining.launcher import WORKER_MODULE

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
    ctl.supervisor.reopen()  # a deposed leader stopped its supervisor; leading again, it may launch
    with ctl.lock:
        attempt = ctl.attempts.running()
        if attempt is not None and not ctl.supervisor.busy:  # busy: our own child, still running
            if attempt.pid:
                _stop_orphan(attempt.pid, attempt.id)
            status = settle_dead_leaders_attempt(ctl, attempt)
            done.append(f"retrain {attempt.id} of incident {attempt.incident_id} settled as {status}")
        done += review.recover(ctl)  # a champion review killed mid-way: its incident resolved, not retried
        done.extend(retry_interrupted(ctl))
        for incident in ctl.incidents.open_incidents():
            if incident.state == State.RETRAINING and ctl.attempts.running() is None:
                try:
                    ctl.move(incident.id, Event.FAIL, "the daemon stopped before the retrain started")
                    done.append(f"incident {incident.id} was retraining without a worker: marked failed")
                except TransitionError as exc:
                    log.warning("%s", exc)
        replay = ctl.cfg.alerts.sustained_windows + ctl.cfg.alerts.healthy_windows
        for obs in ctl.checklog.recent_observations(replay):
            ctl.policy.observe(obs)
    for line in done:
        log.warning("recovery: %s", line)
    return done
