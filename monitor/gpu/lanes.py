"""Bounded calls into a library that may hang.

An NVML call can block for seconds or forever (a wedged driver, a GPU falling off the bus). A scrape
must still answer within a bound, and an exporter that keeps starting threads for calls that never
return leaks them one per scrape. So each GPU gets one *lane*: a single worker thread that runs one
call at a time. A scrape hands each lane its call and waits until a deadline; a call that is still
running then is abandoned to its lane, and the lane refuses new work until that call returns. The
number of threads is therefore bounded by the number of lanes (GPUs, plus one for initialisation),
however long NVML stays hung.

Why not a one-thread ``concurrent.futures.ThreadPoolExecutor`` per GPU with ``Future.result(timeout)``,
which gives the same bound: their worker threads are not daemon threads, and the interpreter joins them at
exit (``concurrent.futures.thread._python_exit``), so one NVML call that never returns would keep the
exporter from ever exiting on SIGTERM; ``shutdown(wait=False, cancel_futures=True)`` does not help,
the join happens at exit anyway. A lane's thread is a daemon thread. The latch is a plain lock held
until the call ends (cheaper than a Future's condition variable, on a path taken once per GPU per
scrape). ``tests/monitor/gpu/test_lanes.py`` holds both halves of this to account: the process exits
with a lane hung, and does not with an executor.
"""
from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable

_STOP = object()


class Ticket:
    """The pending result of one call. A lock held until the call ends is the cheapest one-shot latch."""

    __slots__ = ("_latch", "value", "error")

    def __init__(self) -> None:
        self._latch = threading.Lock()
        self._latch.acquire()
        self.value: Any = None
        self.error: BaseException | None = None

    def wait(self, timeout: float) -> bool:
        """True once the call has finished (``value`` or ``error`` is set)."""
        if timeout <= 0:
            return self.done
        if self._latch.acquire(timeout=timeout):
            self._latch.release()
            return True
        return False

    @property
    def done(self) -> bool:
        return not self._latch.locked()

    def _finish(self) -> None:
        self._latch.release()


class Lane:
    """One worker thread that runs one call at a time; started on first use."""

    def __init__(self, name: str):
        self.name = name
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._busy = False
        self._thread: threading.Thread | None = None

    @property
    def busy(self) -> bool:
        return self._busy

    def submit(self, fn: Callable[..., Any], *args: Any) -> Ticket | None:
        """Start ``fn(*args)`` on this lane, or return None while an earlier call has not returned."""
        if self._busy:
            return None
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()
        ticket = Ticket()
        self._busy = True
        self._jobs.put((ticket, fn, args))
        return ticket

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is _STOP:
                return
            ticket, fn, args = job
            try:
                ticket.value = fn(*args)
            except BaseException as exc:  # handed to the waiter, who decides what it means
                ticket.error = exc
            # Free the lane before waking the waiter, so a caller that saw the result can submit again.
            self._busy = False
            ticket._finish()

    def stop(self) -> None:
        """Ask the thread to end after its current call (a hung call keeps it, as a daemon thread)."""
        if self._thread is not None:
            self._jobs.put(_STOP)

    def join(self, timeout: float) -> bool:
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()


class Lanes:
    """One lane per key (GPU index), created on demand; at most one thread per key ever."""

    def __init__(self, prefix: str = "gpu-lane"):
        self._prefix = prefix
        self._lanes: dict[Any, Lane] = {}
        self._lock = threading.Lock()

    def __getitem__(self, key: Any) -> Lane:
        lane = self._lanes.get(key)
        if lane is None:
            with self._lock:
                lane = self._lanes.get(key)
                if lane is None:
                    lane = self._lanes[key] = Lane(f"{self._prefix}-{key}")
        return lane

    def close(self, timeout: float = 1.0) -> None:
        lanes = list(self._lanes.values())
        for lane in lanes:
            lane.stop()
        deadline = time.monotonic() + timeout
        for lane in lanes:
            lane.join(max(0.0, deadline - time.monotonic()))

    def __len__(self) -> int:
        return len(self._lanes)
