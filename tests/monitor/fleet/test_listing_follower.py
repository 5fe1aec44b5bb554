"""``GET /v1/models`` on a follower (several daemons on one PostgreSQL store): the model's last check
and running retrain are the leader's, found in the shared store; the follower's own memory of them is
empty (it never checked) or stale (it led the model before), and must not be what the listing says."""
from __future__ import annotations

from types import SimpleNamespace

from monitor.daemon.runtime.fleet import Fleet
from monitor.daemon.runtime.views import iso


def _daemon(leader: bool, stored_check: dict | None, running_attempt: object | None):
    controller = SimpleNamespace(
        last_check=None,  # a follower runs no checks
        supervisor=SimpleNamespace(busy=False),  # nor retrain children
        incidents=SimpleNamespace(current=lambda: None),
        checklog=SimpleNamespace(last=lambda: stored_check),
        attempts=SimpleNamespace(running=lambda: running_attempt))
    return SimpleNamespace(controller=controller, is_leader=leader, _started=True, _check_interval=10.0,
                           cfg=SimpleNamespace(model=SimpleNamespace(task="binary")),
                           champion=SimpleNamespace(last_version="1"))


def test_a_follower_lists_the_leaders_last_check_and_running_retrain_from_the_store():
    stored = {"status": "ok", "ts": 1796546666.0}
    fleet = SimpleNamespace(daemons={"b1": _daemon(False, stored, object())})
    entry = Fleet.summary(fleet, "b1")
    assert entry["leader"] is False
    assert entry["last_check"] == {"state": "ok", "at": iso(1796546666.0)}
    assert entry["retraining"] is True


def test_a_follower_with_nothing_stored_lists_no_check_and_no_retrain():
    fleet = SimpleNamespace(daemons={"b1": _daemon(False, None, None)})
    entry = Fleet.summary(fleet, "b1")
    assert entry["last_check"] is None and entry["retraining"] is False
