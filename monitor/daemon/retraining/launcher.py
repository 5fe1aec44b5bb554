"""Launch a retrain in a child process, so a crash or an out-of-memory kill in training never
takes the daemon down.

The protocol is a job folder (``<home>/retrains/<attempt id>/``)::

    job.json        attempt id, incident id, the daemon's pid             (for the watchdog, recovery)
    request.json    trainer.worker's request: config, trigger, incident id, report paths, data
                    window, and the window file                              (written by the daemon)
    window.parquet  the labelled rows to retrain on                          (written by the daemon)
    worker.log      the child's stdout and stderr
    progress.json   the latest epoch of each model it trains, rewritten while it trains (at most
                    about once a second): what ``driftloop status`` and the demos show of a running retrain
    result.json     trainer.worker's result, written atomically by the child as its last act:
                    {"status": "ok", "outcome": {...}} or {"status": "error"|"interrupted", "message"}
                    (both files: monitor/retrain_contract.py, validated when written and when read)

A child that exits without ``result.json`` failed; the last lines of its log say why.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

import monitor
from monitor.config.base import ENV_PREFIX
from monitor.files import PRIVATE, atomic_write_json
from monitor.retrain_contract import FileWindow, RetrainProgress, RetrainRequest, RetrainResult

WORKER_MODULE = "monitor.daemon.retraining.worker"
KEEP_JOB_DIRS = 20


@dataclass
class RetrainJob:
    attempt_id: str
    incident_id: str
    trigger: str                                # manual, alert or schedule (checked when prepared)
    window: pd.DataFrame
    config: dict[str, Any]                      # DriftloopConfig.model_dump(mode="json")
    report_paths: list[str] = field(default_factory=list)
    data_window: dict[str, Any] | None = None

    def for_attempt(self, attempt_id: str) -> RetrainJob:
        """This job as the attempt ``attempt_id`` runs it (the id is known once the attempt is recorded)."""
        window = {**self.data_window, "attempt_id": attempt_id} if self.data_window is not None else None
        return replace(self, attempt_id=attempt_id, data_window=window)


@dataclass
class ChildResult:
    """What a finished child reported. ``outcome`` is trainer's RetrainOutcome as a dict."""

    exit_code: int | None
    outcome: dict[str, Any] | None = None
    error: str | None = None
    # Stopped because its daemon stopped (shut down, or deposed as leader): not a failure of
    # training, so it is settled ``interrupted`` and retried by the next leader (monitor.daemon.retraining.failover).
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return self.outcome is not None and self.error is None


class RetrainHandle(Protocol):
    pid: int

    def wait(self, timeout: float | None = None) -> ChildResult | None:
        """The result once the child has exited; ``None`` if still running after ``timeout``."""

    def terminate(self, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds."""


class Launcher(Protocol):
    def launch(self, job: RetrainJob) -> RetrainHandle: ...


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def _describe_exit(code: int) -> str:
    if code < 0:
        sig = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        hint = " (killed: out of memory, a timeout or a shutdown)" if -code == signal.SIGKILL else ""
        return f"retrain worker died by {sig}{hint}"
    return f"retrain worker exited with code {code}"


class ProcessHandle:
    def __init__(self, proc: subprocess.Popen, job_dir: Path):
        self._proc = proc
        self.pid = proc.pid
        self.job_dir = job_dir

    def wait(self, timeout: float | None = None) -> ChildResult | None:
        try:
            code = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        return read_result(self.job_dir, code)

    def terminate(self, grace: float = 10.0) -> None:
        if self._proc.poll() is not None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(grace)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def _write_json(path: Path, body: dict[str, Any]) -> None:
    # 0600: the request holds the configuration, and a store or MLflow URL may carry a password.
    atomic_write_json(path, body, mode=PRIVATE, default=str)


def read_progress(job_dir: Path) -> RetrainProgress | None:
    """The running child's ``progress.json``; None before its first epoch, or when unreadable (a
    child of another version: progress is for people, never a decision)."""
    try:
        return RetrainProgress.parse((job_dir / "progress.json").read_text(), where="progress.json")
    except (OSError, ValueError):
        return None


def read_result(job_dir: Path, exit_code: int | None) -> ChildResult:
    result_file = job_dir / "result.json"
    if result_file.exists():
        try:
            body = RetrainResult.parse(result_file.read_text(), where="result.json")
        except (OSError, ValueError) as exc:
            return ChildResult(exit_code, error=f"unreadable result.json: {exc}")
        if body.outcome is not None:
            return ChildResult(exit_code, outcome=body.outcome.model_dump())
        return ChildResult(exit_code, error=f"retrain {body.status}: {body.error or ''}: {body.message or ''}")
    why = _describe_exit(exit_code) if exit_code is not None else "retrain worker vanished"
    tail = _tail(job_dir / "worker.log")
    return ChildResult(exit_code, error=f"{why}; last log lines:\n{tail}" if tail else why)


class ProcessLauncher:
    """Runs ``python -m monitor.daemon.retraining.worker <job dir>``. The child watches its parent and
    exits if the daemon dies, so an orphan can never promote behind a restarted daemon's back."""

    def __init__(self, root: Path, python: str = sys.executable, module: str = WORKER_MODULE,
                 env: dict[str, str] | None = None, keep: int = KEEP_JOB_DIRS):
        self._root = Path(root)
        self._python = python
        self._module = module
        self._env = env
        self._keep = keep

    def prune(self) -> None:
        """Keep the newest ``keep`` job folders (their logs are what explains a failed retrain)."""
        try:
            dirs = sorted((d for d in self._root.iterdir() if d.is_dir()), key=lambda d: d.stat().st_mtime)
        except FileNotFoundError:
            return
        for old in dirs[:-self._keep] if self._keep else []:
            shutil.rmtree(old, ignore_errors=True)

    def prepare(self, job: RetrainJob) -> Path:
        self.prune()
        job_dir = self._root / job.attempt_id
        job_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        job.window.to_parquet(job_dir / "window.parquet", index=False)
        # The full configuration travels as overrides, so the child trains exactly as configured here.
        # Validated here, so a mistake of ours fails before a child is started (ValidationError).
        request = RetrainRequest.model_validate({
            "config": job.config, "trigger": job.trigger, "incident_id": job.incident_id,
            "report_paths": list(job.report_paths), "data_window": job.data_window,
            "window": FileWindow(source="file", path=str((job_dir / "window.parquet").resolve()))})
        _write_json(job_dir / "request.json", request.model_dump())
        _write_json(job_dir / "job.json", {"attempt_id": job.attempt_id, "incident_id": job.incident_id,
                                           "parent_pid": os.getpid()})
        return job_dir

    def launch(self, job: RetrainJob) -> ProcessHandle:
        job_dir = self.prepare(job)
        env = dict(os.environ if self._env is None else self._env)
        # The child must import this project even when the daemon was started from elsewhere: the
        # folder that holds the ``monitor`` package (and the user's ``examples``-style entrypoints).
        root = str(Path(monitor.__file__).resolve().parents[1])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        # The request holds this model's whole configuration (file, environment and flags applied):
        # the child must not read the deployment's file again (./driftloop.yaml or $DRIFTLOOP_CONFIG).
        # It holds every model, and validating the others with this model's sections as overrides
        # failed the retrain (every model named like this one; another model's typo not yet reloaded).
        env[ENV_PREFIX + "CONFIG"] = os.devnull
        for key in [k for k in env if k.startswith(ENV_PREFIX + "MODELS")]:  # models.<name>.…, models_dir
            del env[key]
        with open(job_dir / "worker.log", "ab") as log_file:
            proc = subprocess.Popen([self._python, "-m", self._module, str(job_dir)], stdout=log_file,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    cwd=os.getcwd())
        return ProcessHandle(proc, job_dir)
