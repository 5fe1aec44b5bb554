"""The retrain supervisor against real child processes (a scripted stand-in worker)."""
import os
import queue
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from monitor.daemon.state.attempts import AttemptStore, BusyError
from monitor.daemon.retraining.launcher import ProcessLauncher, RetrainJob
from monitor.daemon.retraining.supervisor import RetrainSupervisor
from tests.support.waiting import wait_until

STUB = "tests.monitor.daemon.stub_worker"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def settled():
    return queue.Queue()


@pytest.fixture
def make_supervisor(engine, clock, tmp_path, settled):
    made = []

    def make(timeout=60.0):
        attempts = AttemptStore(engine, "demo", clock)
        sup = RetrainSupervisor(attempts, ProcessLauncher(tmp_path / "retrains", module=STUB),
                                lambda a, r: (attempts.finish(a.id, "promoted" if r.ok else "failed", error=r.error),
                                              settled.put((a, r))),
                                timeout_seconds=timeout)
        made.append(sup)
        return sup, attempts
    yield make
    for sup in made:
        sup.stop(grace=1)


def job(behaviour):
    return RetrainJob("", "inc-1", "alert", pd.DataFrame({"x": [1.0, 2.0]}), config={},
                      data_window={"behaviour": behaviour})


def test_success_reports_the_outcome_and_frees_the_slot(make_supervisor, settled):
    sup, attempts = make_supervisor()
    attempt = sup.launch(job("promote"), rows=2)
    assert attempt.pid and attempt.status == "running"
    done, result = settled.get(timeout=60)
    assert done.id == attempt.id and result.ok and result.exit_code == 0
    assert result.outcome["challenger_version"] == "2"
    assert sup.wait_idle(5) and not sup.busy
    assert attempts.get(attempt.id).status == "promoted"


def test_single_flight(make_supervisor, settled, tmp_path):
    sup, _ = make_supervisor()
    first = sup.launch(job("hang"))
    with pytest.raises(BusyError):
        sup.launch(job("promote"))
    marker = tmp_path / "retrains" / first.id / "hanging"
    wait_until(marker.exists, 30, message="the child never reached 'hanging'")
    assert sup.busy
    sup.stop(grace=1)
    _, result = settled.get(timeout=30)
    assert not result.ok and "aborted: the daemon is shutting down" in result.error
    assert "SIGTERM" in result.error


@pytest.mark.parametrize("behaviour,expected", [
    ("crash", "exited with code 1"),
    ("sigkill", "died by SIGKILL (killed: out of memory"),
])
def test_a_dying_child_is_a_failed_attempt_not_a_dead_daemon(make_supervisor, settled, behaviour, expected):
    sup, attempts = make_supervisor()
    attempt = sup.launch(job(behaviour))
    _, result = settled.get(timeout=60)
    assert not result.ok and expected in result.error
    if behaviour == "crash":  # the log tail travels with the error
        assert "illegal memory access" in result.error
    assert attempts.get(attempt.id).status == "failed"
    assert sup.launch(job("promote")).status == "running"  # the slot is free again
    settled.get(timeout=60)


def test_timeout_kills_the_child(make_supervisor, settled):
    sup, _ = make_supervisor(timeout=1.0)
    attempt = sup.launch(job("hang"))
    _, result = settled.get(timeout=30)
    assert "timed out after 1 s" in result.error
    with pytest.raises(ProcessLookupError):
        os.kill(attempt.pid, 0)


def test_child_stops_when_its_daemon_dies(tmp_path, engine):
    """The watchdog: a worker whose parent is SIGKILLed exits by itself (no orphan can promote later)."""
    script = f"""
import sys, time, pandas as pd
from sqlalchemy import create_engine
from monitor.daemon.state.attempts import AttemptStore
from monitor.daemon.retraining.launcher import ProcessLauncher, RetrainJob
a = AttemptStore(create_engine({str(engine.url)!r}), "demo", time.time)
att = a.begin("inc-9", "alert")
h = ProcessLauncher({str(tmp_path / 'r')!r}, module={STUB!r}).launch(
    RetrainJob(att.id, "inc-9", "alert", pd.DataFrame({{"x": [1.0]}}), {{}}, data_window={{"behaviour": "hang"}}))
print(h.pid, flush=True)
time.sleep(600)
"""
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=os.getcwd())
    child_pid = int(parent.stdout.readline())
    wait_until(lambda: list((tmp_path / "r").glob("*/hanging")), 30, message="the child never reached 'hanging'")
    parent.kill()
    parent.wait()
    try:
        wait_until(lambda: not _alive(child_pid), 10, message="the retrain worker outlived its daemon")
    except AssertionError:
        os.kill(child_pid, 9)
        raise


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_child_finds_the_project_from_anywhere(engine, clock, tmp_path, settled, monkeypatch):
    """A daemon started in another folder, with no PYTHONPATH: the child still imports the project
    (the launcher puts the folder holding ``monitor`` first on its path, not ``monitor`` itself,
    whose modules would shadow the standard library's)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    attempts = AttemptStore(engine, "demo", clock)
    sup = RetrainSupervisor(attempts, ProcessLauncher(tmp_path / "r", module=STUB, env=env),
                            lambda a, r: settled.put(r), timeout_seconds=60)
    sup.launch(job("promote"))
    result = settled.get(timeout=60)
    assert result.ok, result.error
    assert not (ROOT / "monitor" / "stub_worker.py").exists()  # the stub is found through the root only


def test_a_child_that_cannot_start_is_a_failed_attempt(engine, clock, tmp_path, settled):
    attempts = AttemptStore(engine, "demo", clock)
    sup = RetrainSupervisor(attempts, ProcessLauncher(tmp_path / "r", python=str(tmp_path / "no-python")),
                            lambda a, r: (attempts.finish(a.id, "failed", error=r.error), settled.put(r)),
                            timeout_seconds=60)
    attempt = sup.launch(job("promote"))
    result = settled.get(timeout=5)
    assert "could not start the retrain worker" in result.error
    assert attempts.get(attempt.id).status == "failed" and not sup.busy
