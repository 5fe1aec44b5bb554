"""The walk from a breach to a promotion (issue 25, "How it is measured": it "crosses at most 8
files of monitor/daemon, each once").

A real check on real, degraded traffic opens an incident and starts the (stand-in) retrain child;
the supervisor's thread settles its promotion. ``sys.setprofile`` (and ``threading.setprofile``
for the supervisor's thread) records every call into a file of ``monitor/daemon``; a file is
*entered* when called from outside it (the nearest calling frame in ``monitor/daemon`` is in
another file, or there is none). The figures are printed (``pytest -s``) so the target stays visible.
"""
from __future__ import annotations

import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any, Callable

import pytest

import monitor.daemon

DAEMON = str(Path(monitor.daemon.__file__).resolve().parent)
GOAL = 8


class Walk:
    """The daemon files entered, in order, while recording (all threads started meanwhile too)."""

    def __init__(self) -> None:
        self.entries: list[str] = []
        self.calls: set[tuple[str, str]] = set()  # (calling file, entered file), between two of our files

    @staticmethod
    def _ours(frame: FrameType | None) -> str | None:
        name = frame.f_code.co_filename if frame is not None else ""
        return name[len(DAEMON) + 1:] if name.startswith(DAEMON) else None

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        here = self._ours(frame)
        if here is None:
            return
        caller = frame.f_back
        while caller is not None and self._ours(caller) is None:
            caller = caller.f_back
        source = self._ours(caller)
        if source != here:
            self.entries.append(here)
            if source is not None:
                self.calls.add((source, here))

    def record(self, action: Callable[[], Any]) -> Any:
        threading.setprofile(self._profile)
        sys.setprofile(self._profile)
        try:
            return action()
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]  # None unsets it (typeshed says a function)

    @property
    def files(self) -> list[str]:
        """Each file once, in the order first entered."""
        return list(dict.fromkeys(self.entries))

    @property
    def circles(self) -> list[list[str]]:
        """Files that call each other round (A → … → B → A, e.g. a callback into a caller): the
        strongly connected components of the calls between files, each listed in walk order."""
        reach = {f: {b for a, b in self.calls if a == f} for f in self.files}
        changed = True
        while changed:  # transitive closure; a walk has a few dozen files
            changed = False
            for out in reach.values():
                more = set().union(*(reach.get(g, set()) for g in out)) - out
                if more:
                    out |= more
                    changed = True
        found: list[list[str]] = []
        for f in self.files:
            ring = [g for g in self.files if g in reach[f] and f in reach[g]]
            if ring and ring not in found:
                found.append(ring)
        return found

    @property
    def reentered(self) -> dict[str, int]:
        return {f: self.entries.count(f) for f in self.files if self.entries.count(f) > 1}


class WalkTooLong(AssertionError):
    """The walk is longer than issue 25's goal (the only failure the xfail below expects)."""


def meet_the_goal(walk: Walk) -> None:
    if len(walk.files) > GOAL or walk.reentered:
        raise WalkTooLong(f"{len(walk.files)} files, {len(walk.entries)} entries, re-entered: {walk.reentered}")


# Measured at the four rooms: 18 files, 81 entries (c282d6b, the lifecycle table under way); 22 files,
# 88 entries with the controller split into floors (moves, retrains, settlement) and the daemon's wiring
# in a module of its own; 22 files, 91 entries with the views in one package (7c70882); 22 files, 76 entries
# and no circle once the daemon's wiring, the supervisor and the settlement stopped calling back and the
# finite-number helpers left the daemon (monitor/finite.py). Strict: when
# the walk meets the goal, this test XPASSes, fails, and the mark comes off. ``pytest -s`` prints the
# files in order.
@pytest.mark.xfail(strict=True, raises=WalkTooLong, reason=(
    "issue 25 goal: a walk from a breach to a promotion crosses at most 8 files of monitor/daemon, each "
    "once; measured 22 files, 76 entries"))
def test_the_walk_from_a_breach_to_a_promotion(make_daemon):
    daemon, traffic = make_daemon()
    daemon.start(scheduler=False)
    traffic.send(1500, 40, concept=1.0)
    walk = Walk()

    def breach_to_promotion():
        report = daemon.run_check_now()
        assert report.incident is not None and report.action.started, report.action
        assert daemon.wait_for_retrain(60)
        return report.incident.id

    incident_id = walk.record(breach_to_promotion)
    assert daemon.controller.incidents.get(incident_id).state == "promoted"
    print(f"\nthe walk: {len(walk.files)} files of monitor/daemon, {len(walk.entries)} entries: "
          f"{' → '.join(walk.files)}\nre-entered: {walk.reentered}\ncircles: {walk.circles}")
    # The tracer sees the walk: the room that decides and the one that retrains are both on it.
    assert "runtime/daemon.py" in walk.files and "retraining/supervisor.py" in walk.files
    # Held now (a plain failure, not the xfail's): no file on the walk calls back into one that called
    # it. Until 2026-12-02 nine files went round through the daemon's wiring lambdas, the supervisor's
    # ``job_for`` and settlement's reach into the retrain floor.
    assert walk.circles == [], walk.circles
    meet_the_goal(walk)


def test_the_walk_counts_files_and_reentries():
    """The recorder can fail: calls between two of our files are entries, calls inside one are not."""
    walk = Walk()
    walk.entries = ["runtime/daemon.py", "runtime/controller.py", "state/incidents.py", "runtime/controller.py"]
    assert walk.files == ["runtime/daemon.py", "runtime/controller.py", "state/incidents.py"]
    assert walk.reentered == {"runtime/controller.py": 2}
    with pytest.raises(WalkTooLong):
        meet_the_goal(walk)
    walk.calls = {("runtime/daemon.py", "runtime/controller.py"), ("runtime/controller.py", "state/incidents.py"),
                  ("state/incidents.py", "runtime/controller.py")}
    assert walk.circles == [["runtime/controller.py", "state/incidents.py"]]  # a callback is a circle
    walk.calls.discard(("state/incidents.py", "runtime/controller.py"))
    assert walk.circles == []
    meet_the_goal(Walk())  # an empty walk meets it
    from monitor.daemon.decisions.breach import level
    recorded = Walk()
    recorded.record(lambda: [level(0.5, 0.9) for _ in range(3)])
    assert recorded.entries == ["decisions/breach.py"] * 3  # entered from outside each time
