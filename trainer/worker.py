"""The retrain worker: one retrain in a process of its own, so a crash or an OOM never takes the
daemon down. The daemon writes a JSON request, runs ``python -m trainer.worker REQUEST RESULT`` and
reads the JSON result; see docs/CONTRACTS.md ("Retrain worker") for both formats.

Exit status: 0 a result (promoted or rejected), 2 an expected failure (bad data, MLflow down, bad
config; the result says which), 75 interrupted by SIGTERM/SIGINT after a checkpoint (run again with
``"resume": true``), 1 a bug (traceback on stderr). The result file is written atomically in every
case but a hard kill.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

from monitor.errors import DriftloopError, UserInputError
from monitor.files import PRIVATE, atomic_write_json
from monitor.logs import setup_logging

log = logging.getLogger(__name__)

EXIT_OK, EXIT_BUG, EXIT_FAILED = 0, 1, 2
REQUEST_KEYS = {"config_path", "config", "trigger", "incident_id", "report_paths", "data_window", "window", "resume"}


# Reads the labelled window from the monitor's store: ``store_window(cfg, last_n=, since=, until=)``.
# Injected by the monitor (monitor.daemon.retraining.worker, ``driftloop retrain``): the trainer knows nothing
# of the store (docs/development.md, "Layers").
StoreWindow = Callable[..., Any]


def load_window(cfg: Any, spec: dict[str, Any] | None, store_window: StoreWindow | None = None):
    """The labelled rows to retrain on: ``{"source": "store", "last_n", "since", "until"}`` (default;
    needs ``store_window``) or ``{"source": "file", "path": ...}``."""
    spec = dict(spec or {"source": "store"})
    source = spec.pop("source", "store")
    if source == "file":
        from trainer.data import read_table
        if "path" not in spec:
            raise UserInputError("window.source 'file' needs window.path")
        return read_table(spec["path"])
    if source != "store":
        raise UserInputError(f"window.source must be 'store' or 'file', got {source!r}")
    unknown = set(spec) - {"last_n", "since", "until"}
    if unknown:
        raise UserInputError(f"window: unknown key(s) {', '.join(sorted(unknown))}")
    if store_window is None:
        raise UserInputError("window.source 'store' is read by the monitor's retrain child "
                             "(python -m monitor.daemon.retraining.worker) or `driftloop retrain`; "
                             "python -m trainer.worker alone reads window.source 'file'")
    return store_window(cfg, last_n=spec.get("last_n"), since=spec.get("since"), until=spec.get("until"))


def run_request(request: dict[str, Any], store_window: StoreWindow | None = None) -> dict[str, Any]:
    """Run one retrain request in this process; returns the outcome as a dict. Raises our errors."""
    from monitor.config import load_config
    from trainer.retraining import retrain
    unknown = set(request) - REQUEST_KEYS
    if unknown:
        raise UserInputError(f"retrain request: unknown key(s) {', '.join(sorted(unknown))}")
    cfg = load_config(request.get("config_path"), overrides=request.get("config") or None)
    log.info("retrain request: trigger %s, incident %s, window %s", request.get("trigger", "manual"),
             request.get("incident_id"), request.get("window") or {"source": "store"})
    window = load_window(cfg, request.get("window"), store_window)
    outcome = retrain(cfg, window, trigger=request.get("trigger", "manual"), incident_id=request.get("incident_id"),
                      report_paths=request.get("report_paths") or (), data_window=request.get("data_window"),
                      resume=bool(request.get("resume", False)))
    if outcome is None:  # what another torchrun rank than 0 gets; the worker runs as one process
        raise RuntimeError("retrain gave no outcome: the retrain worker must run as rank 0 (or without torchrun)")
    return outcome.to_dict()


def write_json_atomic(path: Path, payload: dict[str, Any]) -> None:
    atomic_write_json(path, payload, mode=PRIVATE, indent=2, default=str)


def main(argv: list[str] | None = None, store_window: StoreWindow | None = None) -> int:
    from trainer.loop import EXIT_INTERRUPTED, TrainingInterrupted
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m trainer.worker REQUEST.json RESULT.json", file=sys.stderr)
        return EXIT_FAILED
    request_path, result_path = Path(argv[0]), Path(argv[1])
    # The CLI's set-up (monitor.logs), first from the environment, then from the request's config:
    # a daemon with logging.format json gets JSON lines from its retrain child too.
    setup_logging(os.environ.get("DRIFTLOOP_LOGGING__LEVEL", "INFO"),
                  os.environ.get("DRIFTLOOP_LOGGING__FORMAT", "text"))
    try:
        try:
            request = json.loads(request_path.read_text())
        except (OSError, ValueError) as exc:
            raise UserInputError(f"cannot read retrain request {request_path}: {exc}") from exc
        if not isinstance(request, dict):
            raise UserInputError(f"retrain request {request_path}: expected a JSON object")
        from monitor.config import load_config
        cfg = load_config(request.get("config_path"), overrides=request.get("config") or None)
        setup_logging(cfg.logging.level, cfg.logging.format)
        outcome = run_request(request, store_window)
    except TrainingInterrupted as exc:
        write_json_atomic(result_path, {"status": "interrupted", "error": "TrainingInterrupted", "message": str(exc),
                                        "checkpoint": str(exc.checkpoint) if exc.checkpoint else None})
        return EXIT_INTERRUPTED
    except DriftloopError as exc:
        write_json_atomic(result_path, {"status": "error", "error": type(exc).__name__, "message": str(exc)})
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:  # a bug: keep the traceback, still leave a result for the daemon
        traceback.print_exc()
        write_json_atomic(result_path, {"status": "error", "error": "InternalError",
                                        "message": f"{type(exc).__name__}: {exc}"})
        return EXIT_BUG
    write_json_atomic(result_path, {"status": "ok", "outcome": outcome})
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
