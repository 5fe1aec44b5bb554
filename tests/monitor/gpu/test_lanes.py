"""Why monitor.gpu.lanes is hand-made (its docstring): a process exits while a lane's call hangs,
and does not while a one-thread ThreadPoolExecutor's call hangs. Also what a lane promises."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from monitor.gpu.lanes import Lane, Lanes

REPO = Path(__file__).resolve().parents[3]

HANG = textwrap.dedent("""
    import sys, threading
    sys.path.insert(0, {repo!r})
    hang = threading.Event()
    if sys.argv[1] == "executor":
        import concurrent.futures as cf
        ex = cf.ThreadPoolExecutor(max_workers=1)
        f = ex.submit(hang.wait)
        try:
            f.result(timeout=0.1)
        except cf.TimeoutError:
            pass
        ex.shutdown(wait=False, cancel_futures=True)
    else:
        from monitor.gpu.lanes import Lane
        lane = Lane("gpu-lane-0")
        assert not lane.submit(hang.wait).wait(0.1)
        lane.stop()
    print("done", flush=True)
""")


def _exits_within(kind: str, seconds: float) -> bool:
    proc = subprocess.Popen([sys.executable, "-c", HANG.format(repo=str(REPO)), kind], stdout=subprocess.PIPE,
                            text=True)
    try:
        proc.wait(seconds)
        return True
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return False
    finally:
        assert proc.stdout.read().strip() == "done"  # both got as far as returning from main


def test_a_hung_lane_does_not_keep_the_process_from_exiting():
    assert _exits_within("lane", 10.0)


def test_a_hung_executor_call_does_keep_the_process_from_exiting():
    """The reason the lane exists; if a Python release changes this, lanes.py can become an executor."""
    assert not _exits_within("executor", 2.0)


def test_a_busy_lane_refuses_work_until_its_call_returns():
    lane = Lane("t")
    release = threading.Event()
    first = lane.submit(release.wait)
    assert first is not None and not first.wait(0.05)
    assert lane.submit(lambda: 1) is None and lane.busy
    release.set()
    assert first.wait(5) and first.value is True and first.error is None
    second = lane.submit(lambda: 1 / 0)
    assert second is not None and second.wait(5) and isinstance(second.error, ZeroDivisionError)
    lane.stop()
    assert lane.join(5)


def test_lanes_are_one_thread_per_key():
    lanes = Lanes("t")
    assert lanes[0] is lanes[0] and lanes[0] is not lanes[1] and len(lanes) == 2
    lanes.close(1.0)
