"""The retrain child the daemon launches: ``python -m monitor.daemon.retraining.worker <job dir>``.

A thin wrapper around the trainer's worker (``trainer.worker``: request JSON in, result JSON
out, exit 0 / 2 / 75 / 1) that adds what only the daemon needs: a watchdog thread that ends
the child within half a second of its daemon dying (exit 3), so an orphan can never promote
behind a restarted daemon's back. Inside the job folder (see :mod:`monitor.daemon.retraining.launcher`):
``job.json`` names the parent pid, ``request.json`` is the trainer's request.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

ORPHAN_EXIT = 3


def _watch_parent(parent_pid: int, interval: float = 0.5) -> None:
    def loop() -> None:
        while True:
            if os.getppid() != parent_pid:
                sys.stderr.write("retrain worker: the daemon is gone; stopping\n")
                sys.stderr.flush()
                os._exit(ORPHAN_EXIT)
            time.sleep(interval)
    threading.Thread(target=loop, name="parent-watchdog", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not (Path(argv[0]) / "job.json").exists():
        sys.stderr.write("usage: python -m monitor.daemon.retraining.worker <job dir containing job.json>\n")
        return 2
    job_dir = Path(argv[0])
    spec = json.loads((job_dir / "job.json").read_text())
    if spec.get("parent_pid"):
        _watch_parent(int(spec["parent_pid"]))
    from monitor.store import labelled_window
    from trainer.worker import main as trainer_worker
    return trainer_worker([str(job_dir / "request.json"), str(job_dir / "result.json")], store_window=labelled_window)


if __name__ == "__main__":
    sys.exit(main())
