"""The daemon hands each check's window to a pending shadow challenger (training.shadow_windows):
real store, real checks, a real retrain held in shadow, and the real registry."""
from __future__ import annotations

import time

from monitor.daemon.daemon import Daemon
from tests.monitor.daemon.conftest import Traffic
from trainer.synthetic import make_dataset


def test_checks_count_live_windows_and_promote_the_shadow_after_them(make_config):
    import trainer
    from trainer.registry import load_champion
    cfg = make_config({"training": {"shadow_windows": 2, "epochs": 20, "retrain_epochs": 20},
                       "drift": {"window_size": 600, "min_rows": 400}})
    window = make_dataset(1500, seed=21, concept_shift=1.0)
    champion = load_champion(cfg)
    served = champion.predict_proba(window)
    window = window.assign(score=served, prediction=(served > 0.5).astype(int), model_version="1")
    out = trainer.retrain(cfg, window, trigger="manual")
    assert out.outcome == "rejected" and out.reasons[0].startswith("held in shadow: challenger v2")

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
