"""While the demos wait for a check behind a running retrain, the timeline says how the retrain is
going (examples/stream.py): its epoch, held-out loss and rows, warm and cold named when both train,
at a bounded rate. ``driftloop status`` shows the same from the retrain's job folder."""
from __future__ import annotations

import json
import time

import httpx

from examples.stream import _next_check, retrain_line
from monitor.daemon.retraining.launcher import read_progress
from monitor.daemon.runtime.views import collect_status, render_status
from monitor.daemon.state.attempts import AttemptStore
from monitor.daemon.state.checklog import CheckLog
from monitor.daemon.state.incidents import IncidentStore
from monitor.retrain_contract import RetrainProgress
from tests.monitor.daemon.conftest import engine  # noqa: F401  (fixture)
from trainer.retrain_progress import ProgressFile


def progress(warm: int, cold: int | None = None) -> dict:
    series = {"warm": {"epoch": warm, "epochs": 10, "rows": 600, "train_loss": 0.5, "val_loss": 0.4 / warm,
                       "seconds": 3.0 * warm}}
    if cold is not None:
        series["cold"] = {"epoch": cold, "epochs": 30, "rows": 600, "val_loss": 1.0 / cold, "seconds": 40.0}
    return {"started": 1.0, "updated": 2.0, "series": series}


def test_a_running_retrain_is_shown_while_the_driver_waits():
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 45))
    running = {"id": "att-0123456789ab", "status": "running", "started_at": started}
    answers = [{"retrain_running": running},  # before its first epoch
               {"retrain_running": {**running, "progress": progress(3)}},
               {"retrain_running": {**running, "progress": progress(10, cold=2)}},
               {"retrain_running": None,
                "last_check": {"id": 9, "ts": "2100-01-01T00:00:00Z", "status": "ok", "verdict": "healthy"}}]

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=answers.pop(0) if len(answers) > 1 else answers[0])

    lines: list[str] = []
    with httpx.Client(base_url="http://daemon", transport=httpx.MockTransport(answer)) as http:
        status = _next_check(http, 8, time.time(), 30, lines.append, progress_every=0)
    assert status["last_check"]["id"] == 9
    assert lines[0].startswith("      retrain att-01234567") and lines[0].endswith(": preparing")
    assert " running 4" in lines[0] or " running 5" in lines[0]  # 45 s and counting
    assert lines[1].endswith(": epoch 3/10, val_loss 0.1333, 600 rows")
    assert lines[2].endswith(": warm epoch 10/10, val_loss 0.0400; cold epoch 2/30, val_loss 0.5000; 600 rows")
    assert len(lines) == 3  # nothing once the retrain is over


def test_the_rate_is_bounded():
    running = {"id": "att-0123456789ab", "started_at": None, "progress": progress(1)}
    polls = iter([{"retrain_running": running}] * 6 + [{"retrain_running": None, "last_check": {
        "id": 9, "ts": "2100-01-01T00:00:00Z", "status": "ok", "verdict": "healthy"}}])
    lines: list[str] = []
    with httpx.Client(base_url="http://daemon",
                      transport=httpx.MockTransport(lambda r: httpx.Response(200, json=next(polls)))) as http:
        _next_check(http, 8, time.time(), 30, lines.append, progress_every=3600)
    assert lines == []  # six polls in about 1.5 s: none an hour after the last line
    assert retrain_line(running) == "      retrain att-01234567 running: epoch 1/10, val_loss 0.4000, 600 rows"


def test_status_shows_the_running_retrains_progress(engine, tmp_path):  # noqa: F811
    attempts = AttemptStore(engine, "demo", time.time)
    attempt = attempts.begin("inc-1", "alert", rows=600)
    jobs = tmp_path / "retrains"
    file = ProgressFile(jobs / attempt.id / "progress.json", every=0)
    (jobs / attempt.id).mkdir(parents=True)
    file.epoch("warm", 10, 600, {"epoch": 4, "train_loss": 0.5, "val_loss": 0.25})
    status = collect_status("demo", lambda: "1", CheckLog(engine, "demo", time.time),
                            IncidentStore(engine, "demo", time.time), attempts,
                            progress=lambda a: read_progress(jobs / a))
    body = json.loads(json.dumps(status))  # what /v1/status sends
    assert RetrainProgress.parse(body["retrain_running"]["progress"]).series["warm"].epoch == 4
    assert f"running: {attempt.id} (epoch 4/10, val_loss 0.2500, 600 rows; " in render_status(body)
    assert read_progress(jobs / "att-none") is None  # no file yet: no progress, no error
