"""The retrain worker: one retrain in a process of its own, so a crash or an OOM never takes the
daemon down. The daemon writes a JSON request, runs ``python -m trainer.worker REQUEST RESULT`` and
reads the JSON result; see docs/CONTRACTS.md ("Retrain worker") for both formats. While it trains,
``progress.json`` beside the result holds the latest epoch of each model it trains
(trainer/retrain_progress.py).

Exit status: 0 a result (promoted or rejected), 2 an expected failure (bad data, MLflow down, bad
config; the result says which), 75 interrupted by SIGTERM/SIGINT after a checkpoint (run again with
``"resume": true``), 1 a bug (traceback on stderr). The result file is written atomically in every
case but a hard kill.
"""
from __future__ import annotations

import logging
import os
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from monitor.errors import DriftloopError, UserInputError
from monitor.files import PRIVATE, atomic_write_json
from monitor.logs import setup_logging
from monitor.retrain_contract import FileWindow, RetrainOutcomeBody, RetrainRequest, RetrainResult, StoreWindow

if TYPE_CHECKING:
    from trainer.retrain_progress import EpochSink

log = logging.getLogger(__name__)

EXIT_OK, EXIT_BUG, EXIT_FAILED = 0, 1, 2
PROGRESS = "progress.json"  # beside the result file


# Reads the labelled window from the monitor's store: ``store_window(cfg, last_n=, since=, until=)``.
# Injected by the monitor (monitor.daemon.retraining.worker, ``driftloop retrain``): the trainer knows nothing
# of the store (docs/development.md, "Layers").
WindowReader = Callable[..., Any]


def load_window(cfg: Any, spec: "dict[str, Any] | StoreWindow | FileWindow | None",
                store_window: WindowReader | None = None):
    """The labelled rows to retrain on: ``{"source": "store", "last_n", "since", "until"}`` (default;
    needs ``store_window``) or ``{"source": "file", "path": ...}`` (monitor/retrain_contract.py)."""
    if not isinstance(spec, (StoreWindow, FileWindow)):
        spec = RetrainRequest.parse({"window": spec or {"source": "store"}}).window
    if isinstance(spec, FileWindow):
        from trainer.data import read_table
        return read_table(spec.path)
    if store_window is None:
        raise UserInputError("window.source 'store' is read by the monitor's retrain child "
                             "(python -m monitor.daemon.retraining.worker) or `driftloop retrain`; "
                             "python -m trainer.worker alone reads window.source 'file'")
    return store_window(cfg, last_n=spec.last_n, since=spec.since, until=spec.until)


def run_request(request: "dict[str, Any] | RetrainRequest", store_window: WindowReader | None = None,
                progress: "EpochSink | None" = None) -> dict[str, Any]:
    """Run one retrain request in this process; returns the outcome as a dict (checked against the
    contract's RetrainOutcomeBody before it leaves). Raises our errors. ``progress``: told each epoch."""
    from monitor.config import load_config
    from trainer.retraining import retrain
    req = request if isinstance(request, RetrainRequest) else RetrainRequest.parse(request)
    cfg = load_config(req.config_path, overrides=req.config or None)
    log.info("retrain request: trigger %s, incident %s, window %s", req.trigger, req.incident_id,
             req.window.model_dump(exclude_none=True))
    window = load_window(cfg, req.window, store_window)
    outcome = retrain(cfg, window, trigger=req.trigger, incident_id=req.incident_id, report_paths=req.report_paths,
                      data_window=req.data_window, resume=req.resume, progress=progress)
    if outcome is None:  # what another torchrun rank than 0 gets; the worker runs as one process
        raise RuntimeError("retrain gave no outcome: the retrain worker must run as rank 0 (or without torchrun)")
    return RetrainOutcomeBody.model_validate(outcome.to_dict()).model_dump()


def write_json_atomic(path: Path, payload: "dict[str, Any] | RetrainResult") -> None:
    if isinstance(payload, RetrainResult):
        payload = payload.model_dump()  # python mode: a metric's NaN stays NaN, as json writes it
    atomic_write_json(path, payload, mode=PRIVATE, indent=2, default=str)


def main(argv: list[str] | None = None, store_window: WindowReader | None = None) -> int:
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
            text = request_path.read_text()
        except OSError as exc:
            raise UserInputError(f"cannot read retrain request {request_path}: {exc}") from exc
        request = RetrainRequest.parse(text, where=f"retrain request {request_path}")
        from monitor.config import load_config
        cfg = load_config(request.config_path, overrides=request.config or None)
        setup_logging(cfg.logging.level, cfg.logging.format)
        from trainer.retrain_progress import ProgressFile
        outcome = run_request(request, store_window, progress=ProgressFile(result_path.with_name(PROGRESS)))
    except TrainingInterrupted as exc:
        write_json_atomic(result_path, RetrainResult(status="interrupted", error="TrainingInterrupted",
                                                     message=str(exc),
                                                     checkpoint=str(exc.checkpoint) if exc.checkpoint else None))
        return EXIT_INTERRUPTED
    except DriftloopError as exc:
        write_json_atomic(result_path, RetrainResult(status="error", error=type(exc).__name__, message=str(exc)))
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:  # a bug: keep the traceback, still leave a result for the daemon
        traceback.print_exc()
        write_json_atomic(result_path, RetrainResult(status="error", error="InternalError",
                                                     message=f"{type(exc).__name__}: {exc}"))
        return EXIT_BUG
    write_json_atomic(result_path, RetrainResult(status="ok", outcome=RetrainOutcomeBody.model_validate(outcome)))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
