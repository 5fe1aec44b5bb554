"""The daemon hands each check's window to a pending shadow challenger (training.shadow.windows):
real store, real checks, a real retrain held in shadow, and the real registry."""
from __future__ import annotations

import time

from monitor.daemon.decisions.actions import StartKind, Wait, WaitKind
from monitor.daemon.runtime.daemon import Daemon
from monitor.daemon.state.incidents import STATES
from tests.monitor.daemon.conftest import Traffic
from trainer.synthetic import make_dataset


def test_checks_count_live_windows_and_promote_the_shadow_after_them(make_config):
    import trainer
    from trainer.registry import load_champion
    cfg = make_config({"training": {"shadow": {"windows": 2}, "epochs": 20, "retrain_epochs": 20},
                       "drift": {"window_size": 600, "min_rows": 400}})
    window = make_dataset(1500, seed=21, concept_shift=1.0)
    champion = load_champion(cfg)
    served = champion.predict_proba(window)
    window = window.assign(score=served, prediction=(served > 0.5).astype(int), model_version="1")
    out = trainer.retrain(cfg, window, trigger="manual")
    assert out.outcome == "shadow" and out.reasons[0].startswith("held in shadow: challenger v2")

    daemon = Daemon(cfg)
    try:
        daemon.start(scheduler=False)
        traffic = Traffic(cfg, daemon.store, start=time.time() + 60)  # live rows after the shadow began
        traffic.send(600, 71, concept=1.0, tag_version=True)
        daemon.run_check_now()
        assert daemon.controller.last_shadow.startswith("shadow v2: window 1/2 counted (600 rows")
        assert load_champion(cfg).version == "1"
        daemon.run_check_now()  # no new rows: not a window
        assert daemon.controller.last_shadow.endswith("(0 rows since the last one < drift.min_rows 400); 1/2")
        traffic.send(600, 72, concept=1.0, tag_version=True)
        report = daemon.run_check_now()
        assert report.outcome.champion_version == "1"  # this check still judged the old champion
        assert daemon.controller.last_shadow == "shadow v2: promoted after 2 live windows beside v1"
        assert load_champion(cfg).version == "2"
        assert daemon.run_check_now().outcome.champion_version == "2"
    finally:
        daemon.stop(grace=5)


def test_a_shadow_promotion_is_a_promotion_by_the_loop(make_config):
    """A retrain run by the daemon whose challenger is held in shadow: its attempt and incident say
    ``shadow`` (not a rejection: no doubled retry rows, no escalation), further breaches wait for the
    shadow instead of retraining again, and the live windows' promotion settles the same attempt and
    incident as ``promoted`` — so the reference level (the pre-drift bar) survives it."""
    from trainer.registry import load_champion
    cfg = make_config({"training": {"shadow": {"windows": 1}, "epochs": 30, "retrain_epochs": 30, "patience": 5}})
    daemon = Daemon(cfg)
    try:
        daemon.start(scheduler=False)
        before = Traffic(cfg, daemon.store)
        before.send(1500, 80, tag_version=True)
        assert daemon.run_check_now().incident is None
        level = daemon.controller.levels.read()
        assert level is not None and level["reference_version"] == 1.0
        before.send(1500, 81, concept=1.0, tag_version=True)
        incident = daemon.run_check_now().incident
        assert incident is not None and incident.state == "retraining"
        assert daemon.wait_for_retrain(300)
        attempt = daemon.controller.attempts.for_incident(incident.id)[-1]
        assert (attempt.status, attempt.challenger_version) == ("shadow", "2"), (attempt.reasons, attempt.error)
        assert daemon.controller.incidents.get(incident.id).state == "shadow"
        assert load_champion(cfg).version == "1"

        after = Traffic(cfg, daemon.store, start=time.time() + 60)  # live rows after the shadow began
        after.send(1500, 82, concept=1.0, tag_version=True)
        report = daemon.run_check_now()  # still breaching on v1: waits for the shadow, which it then counts
        assert report.action.retrain is StartKind.DEFERRED and report.action.wait == Wait(WaitKind.SHADOW)
        assert daemon.controller.attempts.running() is None
        assert daemon.controller.last_shadow == "shadow v2: promoted after 1 live windows beside v1"
        attempt = daemon.controller.attempts.get(attempt.id)
        assert attempt.status == "promoted" and attempt.champion_version == "2"
        assert attempt.reasons[-1] == daemon.controller.last_shadow
        incident = daemon.controller.incidents.get(incident.id)
        assert incident.state == "promoted" and incident.version == "2"
        kinds = [e["kind"] for e in daemon.controller.incidents.events(incident.id)]
        assert [k for k in kinds if k in STATES] == ["retraining", "shadow", "promoted"], kinds
        assert "retrain_deferred" in kinds  # the breach while in shadow waited for it

        after.send(1500, 83, concept=1.0)
        assert daemon.run_check_now().outcome.champion_version == "2"
        level = daemon.controller.levels.read()
        assert level is not None and level["reference_version"] == 1.0  # kept: the loop promoted v2
    finally:
        daemon.stop(grace=5)
