"""The champion review (monitor/daemon/retraining/review.py) with real parts: MLflow on SQLite, PyTorch on the
CPU, the daemon's store. v1 is fit for concept A (the session's baseline); v2 is made champion as
a promotion of the loop would. On recent rows of A, a v2 fit for another concept is significantly
worse, and the review reinstates v1 with the reason; a v2 equal to v1 is kept (no churn); a daemon
killed in the middle of a reinstatement leaves one champion and a complete record after restart."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from monitor.daemon.runtime.daemon import Daemon
from tests.monitor.daemon.conftest import SMALL, Traffic, merge
from tests.monitor.daemon.test_loop import champion_history

REVIEW = {"training": {"review_interval_checks": 1, "review_versions": 3}}


def _second_champion(cfg, concept: float, seed: int) -> None:
    """Register v2 trained on ``concept`` and move the alias to it (a promoted challenger)."""
    import trainer
    from trainer import registry as reg
    from trainer.synthetic import make_dataset
    trainer.train_baseline(cfg, make_dataset(3000, seed=seed, concept_shift=concept))
    with reg.session(cfg), reg.translating(cfg, "test"):
        assert reg.Registry(cfg).make_champion("2") == "1"


def _alias(cfg) -> str | None:
    from trainer import registry as reg
    with reg.session(cfg), reg.translating(cfg, "test"):
        return reg.Registry(cfg).alias_version(reg.CHAMPION)


def _review_runs(cfg) -> list:
    from mlflow import MlflowClient
    client = MlflowClient(tracking_uri=cfg.tracking_uri)
    exp = client.get_experiment_by_name(cfg.experiment_name)
    return [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("driftloop.start") == "previous"]


def test_an_earlier_better_version_is_reinstated_with_the_reason(make_config):
    cfg = make_config(REVIEW)
    _second_champion(cfg, concept=1.0, seed=2)        # v2 fit for concept B
    daemon = Daemon(cfg)
    try:
        daemon.start(scheduler=False)
        Traffic(cfg, daemon.store).send(1500, 40, tag_version=True)   # the world is A again
        message = daemon.review.run("test")
        assert message.startswith("champion review: promoted v1"), message
        assert _alias(cfg) == "1" and champion_history(cfg)[-1] == "1"
        attempt = daemon.controller.attempts.recent(1)[0]
        assert attempt.status == "promoted" and attempt.challenger_version == "1"
        reason = attempt.reasons[0]
        assert reason.startswith("earlier version 1 is better on the last 1500 labelled rows: accuracy "), reason
        assert "McNemar p=" in reason
        incident = daemon.controller.incidents.get(attempt.incident_id)
        assert incident.reason == "review" and incident.state == "resolved"
        assert daemon.controller.incidents.current() is None
        # A promotion by the loop: the reference level is kept when v1 serves again.
        assert daemon.controller.levels.promoted_by_loop("1")
        runs = _review_runs(cfg)
        assert len(runs) == 1 and runs[0].data.tags["driftloop.outcome"] == "promoted"
        assert runs[0].data.tags["driftloop.version"] == "1"
        # Reviewed again on the same rows, v1 stays: v2 is the worse one.
        again = daemon.review.run("test")
        assert "champion review" in again and "promoted" not in again, again
        assert _alias(cfg) == "1" and len(daemon.controller.attempts.recent(10)) == 1
    finally:
        daemon.stop(grace=2)


def test_a_review_during_an_open_incident_reinstates_into_it(make_config):
    """An incident stays open (its retrains rejected) while the champion is worse than one the loop
    had: the review runs anyway (not while it retrains) and the reinstatement is that incident's
    promotion, judged by the next checks, not an incident of its own."""
    cfg = make_config(REVIEW)
    _second_champion(cfg, concept=1.0, seed=2)
    daemon = Daemon(cfg)
    try:
        daemon.start(scheduler=False)
        Traffic(cfg, daemon.store).send(1500, 42, tag_version=True)
        ctl = daemon.controller
        opened = ctl.incidents.open("accuracy", "alert", "accuracy dropped", retrain=True)
        message = daemon.review.run("test")
        assert message.startswith("champion review: promoted v1"), message
        assert _alias(cfg) == "1"
        [attempt] = ctl.attempts.recent(10)
        assert attempt.incident_id == opened.id and attempt.status == "promoted"
        incident = ctl.incidents.get(opened.id)
        assert incident.state == "promoted" and incident.version == "1"   # open: the next checks judge v1
        assert [i.id for i in ctl.incidents.recent(10)] == [opened.id]
        # After a located change only the rows since it count: none yet here, so nothing to judge.
        ctl.incidents.set_fields(opened.id, change_ts=time.time() + 86400)
        assert daemon.review.run("test").startswith("champion review skipped: 0 labelled rows")
        ctl.incidents.transition(opened.id, "retraining", "a retrain runs")
        assert daemon.review.run("test") == f"champion review skipped: incident {opened.id} is retraining"
    finally:
        daemon.stop(grace=2)


def test_an_equal_earlier_version_changes_nothing(make_config):
    cfg = make_config(REVIEW)
    _second_champion(cfg, concept=0.0, seed=1)        # v2 trained like v1, on the same rows
    daemon = Daemon(cfg)
    try:
        daemon.start(scheduler=False)
        Traffic(cfg, daemon.store).send(1500, 41, tag_version=True)
        report = daemon.run_check_now()                # review_interval_checks: 1, after every check
        assert report.incident is None, report.action
        assert daemon.review.last is not None and "v1 accuracy" in daemon.review.last, daemon.review.last
        assert daemon.review.run("test").endswith(" s")  # again: still nothing to change
        assert _alias(cfg) == "2"
        assert daemon.controller.attempts.recent(10) == [] and daemon.controller.incidents.recent(10) == []
        assert _review_runs(cfg) == []
    finally:
        daemon.stop(grace=2)


def test_after_an_incident_only_rows_of_the_concept_the_champion_was_promoted_for_count(make_config):
    """A recurring concept A -> B: v2 (fit for B) was promoted by an incident whose change was
    located at the switch, and the incident ended. The review after it must judge on B's rows only;
    on the last rows, mostly A's from before the switch, v1 would look better and be reinstated,
    and then B's model again at the next incident (the churn seen on bench_outside's recurring)."""
    cfg = make_config(merge(REVIEW, {"training": {"review_rows": 4000}}))
    daemon = Daemon(cfg)
    try:
        daemon.start(scheduler=False)
        ctl = daemon.controller
        traffic = Traffic(cfg, daemon.store)
        traffic.send(3000, 43, tag_version=True)                    # concept A, served by v1
        change = traffic.t - traffic.spacing / 2                     # between A's last row and B's first
        _second_champion(cfg, concept=1.0, seed=2)                  # v2 fit for B
        incident = ctl.incidents.open("accuracy", "alert", "accuracy dropped", retrain=True, change_ts=change)
        attempt = ctl.attempts.begin(incident.id, "alert", rows=500)
        ctl.attempts.finish(attempt.id, "promoted", challenger_version="2", champion_version="1")
        ctl.incidents.transition(incident.id, "resolved", "healthy again")
        traffic.send(1200, 44, concept=1.0, tag_version=True)       # concept B, served by v2
        message = daemon.review.run("an incident ended")
        assert "promoted" not in message and message.endswith(" s"), message
        assert "on the last 1200 labelled rows" in daemon.review.last, daemon.review.last  # B's rows only
        assert _alias(cfg) == "2" and [a.id for a in ctl.attempts.recent(10)] == [attempt.id]
        # Without a located change (the incident's field cleared) the last 4000 rows count, mostly A's:
        # v1 is reinstated, which is what the change guards against.
        ctl.incidents.set_fields(incident.id, change_ts=None)
        assert daemon.review.run("test").startswith("champion review: promoted v1")
    finally:
        daemon.stop(grace=2)


CRASH = """
import json, os, sys
from monitor.config import load_config
from trainer import registry as reg
cfg = load_config(path=None, environ={}, overrides=json.loads(sys.argv[1]))
move = reg.Registry.make_champion
def crash(self, version):
    if sys.argv[2] == "after":
        move(self, version)
    os._exit(9)   # killed: no settling, no record of the outcome
reg.Registry.make_champion = crash
from monitor.daemon.runtime.daemon import Daemon
daemon = Daemon(cfg)
daemon.start(scheduler=False)
daemon.review.run("test")
"""


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_review_killed_mid_reinstatement_is_settled_at_restart(make_config, when):
    overrides = merge(SMALL, REVIEW)
    cfg = make_config(REVIEW)
    _second_champion(cfg, concept=1.0, seed=2)
    daemon = Daemon(cfg)
    daemon.start(scheduler=False)
    Traffic(cfg, daemon.store).send(1500, 43, tag_version=True)
    daemon.stop(grace=2)

    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    done = subprocess.run([sys.executable, "-c", CRASH, json.dumps({**overrides, "home": str(cfg.home)}), when],
                          env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 9, done.stderr[-3000:]
    assert _alias(cfg) == ("1" if when == "after" else "2")

    daemon = Daemon(cfg)   # the restart: recovery settles what the killed one left
    try:
        daemon.start(scheduler=False)
        ctl = daemon.controller
        attempt = ctl.attempts.recent(1)[0]
        incident = ctl.incidents.get(attempt.incident_id)
        assert incident.reason == "review" and incident.state == "resolved"
        assert ctl.incidents.current() is None and ctl.attempts.running() is None
        if when == "after":
            assert attempt.status == "promoted" and attempt.challenger_version == "1", attempt
            assert ctl.levels.promoted_by_loop("1")
            assert _alias(cfg) == "1" and champion_history(cfg)[-1] == "1"
            message = daemon.review.run("test")    # nothing left to do: v1 is the better one
            assert "promoted" not in message, message
        else:
            assert attempt.status != "promoted", attempt
            assert _alias(cfg) == "2"
            message = daemon.review.run("test")    # the next review does it, once
            assert message.startswith("champion review: promoted v1"), message
            assert _alias(cfg) == "1"
        assert len([a for a in ctl.attempts.recent(10) if a.status == "promoted"]) == 1
    finally:
        daemon.stop(grace=2)
