"""A check resolves ``drift.min_labels: auto`` for its champion (monitor/drift/min_labels.py) and
everything downstream judges by that need: the result, the policy, ``driftloop check``'s and
``driftloop status``'s text, the stored observation. Real evaluation; the champion and the store are
stand-ins (the window is a frame, the champion a baseline of 97 % accuracy)."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from monitor.config import load_config
from monitor.daemon.decisions.policy import AlertPolicy
from monitor.daemon.runtime.checks import CheckJob
from monitor.daemon.runtime.controller import observation
from monitor.daemon.runtime.views import collect_status, render_check, render_status
from monitor.daemon.state.attempts import AttemptStore
from monitor.daemon.state.checklog import CheckLog
from monitor.daemon.state.incidents import IncidentStore
from monitor.drift import evaluate_window
from tests.monitor.drift.conftest import reference, window


class Frames:
    """The store's ``window`` over one frame."""

    def __init__(self, frame: pd.DataFrame):
        self.frame = frame

    def window(self, last_n=None, since=None, until=None, labelled_only=False) -> pd.DataFrame:
        rows = self.frame[self.frame["label"].notna()] if labelled_only else self.frame
        return (rows.tail(last_n) if last_n else rows).reset_index(drop=True)


@pytest.fixture(scope="module")
def frames():
    live = window(1000, seed=5, labelled=0.8)
    live["ts"] = pd.date_range("2026-01-01", periods=len(live), freq="s", tz="UTC")
    live["id"] = [f"r{i}" for i in range(len(live))]
    return reference(3000), live


def check(tmp_path, frames, min_labels=None):
    ref, live = frames
    drift = {"window_size": 2000, "workspace": ""} | ({"min_labels": min_labels} if min_labels else {})
    cfg = load_config(path=None, environ={}, overrides={"home": str(tmp_path), "drift": drift,
                                                        "server": {"gpu_metrics": False}})
    champion = SimpleNamespace(version="4", model=None, baseline=SimpleNamespace(
        reference=ref, metrics={"accuracy": 0.97, "roc_auc": 0.99}))
    job = CheckJob(cfg, Frames(live), SimpleNamespace(get=lambda: champion), evaluate_window,
                   lambda r, t: (None, None))
    return cfg, job.run()


def test_an_accurate_champion_is_judged_on_fewer_labels(tmp_path, frames, engine):
    cfg, outcome = check(tmp_path, frames)
    r = outcome.result
    need = r.min_labels  # accuracy 291 (binomial at 0.97); this reference's ROC AUC spread asks more (~430)
    assert r.min_labels_auto["accuracy"] == 291 and need == max(r.min_labels_auto.values())
    assert outcome.status == "ok" and 291 <= need < outcome.labelled_rows < 1000 and r.performance_actionable
    verdict = AlertPolicy(cfg.alerts, cfg.drift.min_labels).observe(observation(outcome))
    assert verdict.performance_known and verdict.labels == (outcome.labelled_rows, need)
    text = render_check(outcome, list(verdict.breaches))
    assert f"performance judged from {need} labelled rows (drift.min_labels auto: accuracy 291, roc_auc" in text

    log = CheckLog(engine, "demo", lambda: 1.7e9)
    log.record(outcome, "breach")
    status = collect_status("demo", lambda: "4", log, IncidentStore(engine, "demo", lambda: 1.7e9),
                            AttemptStore(engine, "demo", lambda: 1.7e9))
    assert status["last_check"]["min_labels"] == need and status["last_check"]["min_labels_auto"]["accuracy"] == 291
    assert f"labelled; performance judged from {need} labelled rows (drift.min_labels auto" in render_status(status)
    [stored] = log.recent_observations(1)
    assert stored.min_labels == need


def test_a_configured_number_is_the_need(tmp_path, frames):
    cfg, outcome = check(tmp_path, frames, min_labels=1000)
    r = outcome.result
    assert r.min_labels == 1000 and r.min_labels_auto is None and not r.performance_actionable
    verdict = AlertPolicy(cfg.alerts, cfg.drift.min_labels).observe(observation(outcome))
    assert verdict.labels == (outcome.labelled_rows, 1000)  # judged only as far as its interval proves a drop
    text = render_check(outcome, None)
    assert "performance judged from 1000 labelled rows (drift.min_labels configured)" in text
    assert f"not judged: {outcome.labelled_rows} < 1000 labels" in text
