"""A check that fails with an unexpected exception (not a DriftloopError), the window's store read
included, is recorded as a check with status ``error`` and its traceback logged; the next check runs
normally. A row stored with a time past pandas' range (2262-04-11, what older versions accepted up to
2286) breaks neither checks nor ``POST /v1/retrain``."""
from __future__ import annotations

import logging

import httpx
import pyarrow as pa
import sqlalchemy as sa

from tests.monitor.daemon.test_controller import samples

LATE_US = 9_999_999_999 * 1_000_000  # 2286-11-20T17:46:39Z: taken by the old ingestion bound


def _store_late_row(store) -> None:
    """A prediction and its label stamped in 2286, written straight into the tables (no validation),
    as an older driftloop left them."""
    p, lab = store.tables.predictions, store.tables.labels
    with store.engine.begin() as conn:
        row = dict(conn.execute(sa.select(p).order_by(p.c.seq.desc()).limit(1)).mappings().one())
        row.pop("seq")
        conn.execute(p.insert(), {**row, "id": "late-1", "ts": LATE_US})
        conn.execute(lab.insert(), {"id": "late-1", "label": 1, "ts": LATE_US, "received_at": row["received_at"]})


def test_an_unexpected_store_failure_is_a_recorded_error_and_the_next_check_runs(make_daemon, monkeypatch, caplog):
    daemon, traffic = make_daemon()
    daemon.start(scheduler=False)
    traffic.send(1500, 20)
    assert daemon.run_check_now().outcome.status == "ok"

    def broken(*args, **kwargs):
        raise RuntimeError("simulated fault in the store's window read")

    monkeypatch.setattr(daemon.store, "window", broken)
    with caplog.at_level(logging.ERROR):
        report = daemon.run_check_now()  # raised RuntimeError before
    outcome = report.outcome
    assert outcome.status == "error" and outcome.id is not None
    assert "cannot read the window" in outcome.message and "RuntimeError: simulated fault" in outcome.message
    assert any(r.exc_info and r.exc_info[0] is RuntimeError for r in caplog.records)  # the traceback is logged
    last = daemon.controller.checklog.last()
    assert last["status"] == "error" and "simulated fault" in last["message"]
    assert daemon.status()["last_check"]["status"] == "error"  # not the stale ok check
    assert samples(daemon)[("driftloop_model_check_errors_total", ())] == 1
    assert samples(daemon)[("driftloop_model_check_state", (("state", "error"),))] == 1

    monkeypatch.undo()
    assert daemon.run_check_now().outcome.status == "ok"
    assert daemon.status()["last_check"]["status"] == "ok"


def test_the_late_row_fault_itself_is_a_recorded_error_without_the_window_guard(make_daemon, monkeypatch):
    """The probe's fault, with the window read's guard against it switched off: ArrowInvalid out of
    the nanosecond conversion is still a recorded error check, not an exception out of the job."""
    from monitor.store import window

    daemon, traffic = make_daemon()
    daemon.start(scheduler=False)
    traffic.send(400, 21)
    _store_late_row(daemon.store)
    monkeypatch.setattr(window, "without_unrepresentable", lambda table: table, raising=False)
    report = daemon.run_check_now()
    assert report.outcome.status == "error", report.outcome.message
    assert pa.ArrowInvalid.__name__ in report.outcome.message
    assert daemon.controller.checklog.last()["status"] == "error"
    monkeypatch.undo()
    assert daemon.run_check_now().outcome.status == "ok"


def test_a_row_stored_past_2262_breaks_neither_checks_nor_a_manual_retrain(live_daemon, caplog):
    daemon, url = live_daemon(behaviour="hang")  # 300 labelled rows stored
    _store_late_row(daemon.store)
    with caplog.at_level(logging.WARNING, logger="monitor.store.window"):
        report = daemon.run_check_now()
    assert report.outcome.status == "ok", report.outcome.message
    assert report.outcome.window_rows == 300 and report.outcome.labelled_rows == 300
    assert "left out 1 stored row(s)" in caplog.text
    r = httpx.post(f"{url}/v1/retrain", json={"reason": "after the late row"}, timeout=30)
    assert r.status_code == 202, r.text
    status = httpx.get(f"{url}/v1/status", timeout=10)
    assert status.status_code == 200 and status.json()["last_check"]["status"] == "ok"
