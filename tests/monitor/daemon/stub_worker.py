"""A stand-in retrain child for the supervisor tests: a real process that behaves as told
(``data_window["behaviour"]``), so crashes, kills and hangs can be produced on demand. The
integration tests run the real worker (``monitor.daemon.retraining.worker``) with the real trainer."""
import json
import os
import signal
import sys
import time
from pathlib import Path

from monitor.daemon.retraining.worker import _watch_parent
from monitor.files import PRIVATE, atomic_write_json


def _write_result(job_dir: Path, body: dict) -> None:
    # What trainer.worker writes at the end of a real retrain (the daemon reads nothing else).
    atomic_write_json(job_dir / "result.json", body, mode=PRIVATE, default=str)


job_dir = Path(sys.argv[1])
spec = json.loads((job_dir / "job.json").read_text())
request = json.loads((job_dir / "request.json").read_text())
_watch_parent(spec["parent_pid"], interval=0.1)
# Told by the request (supervisor tests) or by a file next to the job folders (daemon tests).
told = job_dir.parent / "behaviour"
behaviour = request["data_window"].get("behaviour") or (told.read_text().strip() if told.exists() else "promote")
print(f"stub worker {spec['attempt_id']}: {behaviour}", flush=True)
if behaviour == "promote":
    _write_result(job_dir, {"status": "ok", "outcome": {"outcome": "promoted", "challenger_version": "2",
                                        "champion_version": "2",
                                        "run_id": "r1", "metrics": {}, "reasons": ["better"],
                                        "duration_seconds": 1.5, "samples_per_second": 1000.0}})
elif behaviour == "reject":
    # Run metrics told by a file next to the job folders (the attainable-level tests), else none.
    told_metrics = job_dir.parent / "metrics.json"
    metrics = json.loads(told_metrics.read_text()) if told_metrics.exists() else {}
    _write_result(job_dir, {"status": "ok", "outcome": {"outcome": "rejected", "challenger_version": "9",
                                        "champion_version": "1",
                                        "run_id": "r2", "metrics": metrics,
                                        "reasons": ["accuracy gain +0.0010 < required 0.0100"],
                                        "duration_seconds": 1.0, "samples_per_second": 1000.0}})
elif behaviour == "crash":
    raise RuntimeError("CUDA error: an illegal memory access was encountered")
elif behaviour == "sigkill":
    os.kill(os.getpid(), signal.SIGKILL)
elif behaviour == "hang":
    (job_dir / "hanging").touch()
    while True:
        time.sleep(0.05)
