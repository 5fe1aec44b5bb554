"""A check that began before its incident's promotion ended read the window of the champion the
promotion replaced: neither its breach nor its health is the new champion's (bench_loop
``episode``: a breach of v2, decided after v1's reinstatement, re-armed the retry wait).

The race is made certain with the real parts: the test holds the controller's lock, so the
retrain's settling (the supervisor's thread) waits until the check has read its window and
judged its champion, and lets it in before the check's verdict is decided."""
from __future__ import annotations

import pytest

from monitor.daemon.decisions.actions import ActionKind, StartKind
from monitor.daemon.decisions.kinds import Outcome, State


class PromotionEndsMidCheck:
    """The daemon's own check job; the retrain beside it settles while it runs."""

    def __init__(self, ctl, clock):
        self.ctl, self.clock, self.job = ctl, clock, ctl.check_job

    def run(self):
        outcome = self.job.run()       # begun (and judged) on the champion of the moment
        self.clock.advance(60)         # the promotion ends a minute later
        self.ctl.lock.release()        # the test's hold: the retrain's settling may take the lock
        try:
            assert self.ctl.supervisor.wait_idle(60), "the retrain did not settle"
        finally:
            self.ctl.lock.acquire()
        return outcome

    def __getattr__(self, name):
        return getattr(self.job, name)


@pytest.mark.parametrize("later", ["breaching", "healthy"])
def test_a_check_begun_before_the_promotion_ended_does_not_judge_the_new_champion(make_daemon, clock, later):
    daemon, traffic = make_daemon()     # the stand-in child promotes "v2"; the registry keeps v1
    daemon.start(scheduler=False)
    ctl = daemon.controller
    traffic.send(1500, 40, concept=1.0)
    with ctl.lock:
        first = daemon.run_check_now()
        incident = first.incident
        assert first.action.kind is ActionKind.OPENED and first.action.started, first.action
        if later == "healthy":
            traffic.send(1500, 41)      # the window the next check reads is healthy (alerts.healthy_windows=1)
        ctl.check_job = PromotionEndsMidCheck(ctl, clock)
        stale = daemon.run_check_now()
    ctl.check_job = ctl.check_job.job
    promoted = ctl.attempts.for_incident(incident.id)
    assert [a.status for a in promoted] == [Outcome.PROMOTED] and promoted[0].challenger_version == "2"
    assert stale.outcome.champion_version == "1" and stale.outcome.ts < promoted[0].finished_at
    assert stale.verdict.performance_known
    # Neither a breach of the new champion (which would make it wait for new evidence) nor a
    # healthy window of it (which would resolve the incident): the incident stays promoted.
    assert stale.action.kind is ActionKind.OPEN and stale.action.retrain is None, stale.action
    assert stale.action.healthy is None
    assert ctl.incidents.get(incident.id).state is State.PROMOTED

    # The next check begins after the promotion ended: it judges the champion of the moment.
    after = daemon.run_check_now()
    if later == "breaching":
        assert after.action.kind is ActionKind.STILL_BREACHING and after.action.retrain is StartKind.WAITING
        assert ctl.incidents.get(incident.id).state is State.WAITING
    else:
        assert after.action.kind is ActionKind.RESOLVED, after.action
        assert ctl.incidents.get(incident.id).state is State.RESOLVED
