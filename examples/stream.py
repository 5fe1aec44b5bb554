"""Drive a labelled stream through a model service and a running driftloop daemon, as production
would, and keep the timeline: the examples' demos, their end-to-end tests and bench/bench_digits.py
use it.

    result = run_stream(daemon_url, service, batches, echo=print)

Per batch: the service scores the rows (and sends its predictions to driftloop itself), the labels
of the *previous* batch go to the service's ``/outcomes`` (labels arrive one batch late), then
the driver waits for the daemon's next judged check that started after they were sent, with no
retrain running, and reads ``GET /v1/status``. So the figures are in rows, not seconds: a 2-core
laptop retrains slower than traffic arrives, and waiting keeps the story about the loop's
decisions (bench/bench_loop.py waits the same way). While a retrain runs the timeline says so every
``progress_every`` seconds: its epoch of the most, held-out loss and rows, per model when a fresh
one competes with the warm start (the retrain's progress.json, through ``GET /v1/status``).
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Protocol

import httpx
import numpy as np
import pandas as pd

__all__ = ["Batch", "HttpService", "Service", "Step", "StreamResult", "retrain_line", "run_stream", "serving"]

PROGRESS_EVERY = 10.0  # seconds between a running retrain's lines in the timeline


class Service(Protocol):
    """A model service: scores rows and logs them to driftloop; takes their true labels later."""

    def predict(self, rows: pd.DataFrame) -> tuple[str, list[str]]:
        """(the version that scored them, the predicted class per row)."""

    def outcomes(self, labels: pd.DataFrame) -> None:
        """The true labels (``request_id``, ``label``)."""


class HttpService:
    """A service behind HTTP with the examples' routes: ``POST /predict`` (a list of rows) answering
    ``{"model_version", "predictions": [{"class": ...}]}`` and ``POST /outcomes``."""

    def __init__(self, url: str, send: Callable[[pd.DataFrame], list[dict]], timeout: float = 120.0):
        self.http = httpx.Client(base_url=url, timeout=timeout)
        self.send = send  # what of a row the service is sent (the image's uri, the text, ...)

    def predict(self, rows: pd.DataFrame) -> tuple[str, list[str]]:
        answer = self.http.post("/predict", json=self.send(rows))
        answer.raise_for_status()
        body = answer.json()
        return str(body["model_version"]), [str(p["class"]) for p in body["predictions"]]

    def outcomes(self, labels: pd.DataFrame) -> None:
        self.http.post("/outcomes", json=labels.to_dict("records")).raise_for_status()

    def close(self) -> None:
        self.http.close()


@dataclass
class Batch:
    rows: pd.DataFrame  # request_id, what the service is sent, label
    drifted: bool


@dataclass
class Step:
    batch: int
    drifted: bool
    served_by: str
    served_accuracy: float          # of this batch's predictions, known to the driver from its labels
    labelled_after_onset: int       # labelled rows of drifted batches sent to driftloop so far
    check: dict[str, Any]           # /v1/status's last_check
    events: list[str] = field(default_factory=list)
    opened: list[str] = field(default_factory=list)    # reasons of incidents opened since the last batch
    seconds: float = 0.0            # since the stream started


@dataclass
class StreamResult:
    steps: list[Step]
    incidents: list[dict]
    retrains: list[dict]
    seconds: float

    @property
    def promotions(self) -> list[str]:
        return [str(a["challenger_version"]) for a in self.retrains if a.get("status") == "promoted"]

    @property
    def incidents_before_onset(self) -> int:
        return sum(len(s.opened) for s in self.steps if not s.drifted)

    @property
    def detection_rows(self) -> int | None:
        """Labelled rows after the onset when the first incident opened (None: never)."""
        return next((s.labelled_after_onset for s in self.steps if s.drifted and s.opened), None)

    def served_accuracy(self, part: str) -> float:
        """``pre``: over the batches before the onset; ``last``: over the last 20 % of batches."""
        if part == "pre":
            steps = [s for s in self.steps if not s.drifted]
        else:
            steps = self.steps[-max(1, round(0.2 * len(self.steps))):]
        return float(np.mean([s.served_accuracy for s in steps])) if steps else float("nan")


def _status(http: httpx.Client) -> dict:
    answer = http.get("/v1/status", params={"limit": 50})
    answer.raise_for_status()
    return answer.json()


def _next_check(http: httpx.Client, after_id: int | None, sent_at: float, timeout: float,
                echo: Callable[[str], None] | None = None, progress_every: float = PROGRESS_EVERY) -> dict:
    """The status once a judged check that *started* after ``sent_at`` is in, with no retrain
    running (a check already running when the labels arrived may not have seen them). Meanwhile,
    a running retrain's progress to ``echo``, at most once per ``progress_every`` seconds."""
    not_before = pd.Timestamp(int(sent_at) + 1, unit="s", tz="UTC")  # status times are whole seconds
    deadline = time.monotonic() + timeout
    shown = time.monotonic()  # a retrain shorter than progress_every prints nothing
    while True:
        status = _status(http)
        running = status.get("retrain_running")
        if echo is not None and running and time.monotonic() - shown >= progress_every:
            echo(retrain_line(running))
            shown = time.monotonic()
        last = status.get("last_check") or {}
        judged = last.get("verdict") not in (None, "judging") or last.get("status") != "ok"
        fresh = last.get("ts") is not None and pd.Timestamp(last["ts"]) >= not_before
        newer = last.get("id") is not None and (after_id is None or last["id"] > after_id)
        if (newer and judged and fresh and not status.get("retrain_running")) or time.monotonic() > deadline:
            return status
        time.sleep(0.25)


def retrain_line(running: dict) -> str:
    """A running retrain (``/v1/status``'s ``retrain_running``) in one timeline line: ``retrain
    att-1a2b3c4d running 45 s: epoch 3/30, val_loss 0.4123, 600 rows``."""
    from monitor.retrain_contract import RetrainProgress
    found = running.get("progress")
    what = RetrainProgress.parse(found).describe() if found else "preparing"
    started = pd.Timestamp(running["started_at"]).timestamp() if running.get("started_at") else None
    took = f" running {time.time() - started:.0f} s" if started is not None else " running"
    return f"      retrain {running['id'][:12]}{took}: {what}"


def _events(status: dict, seen: set[tuple]) -> tuple[list[str], list[str]]:
    """New incident states and retrain outcomes since the last call, as short lines; and the
    reasons of incidents opened since."""
    lines, opened = [], []
    for inc in reversed(status.get("recent_incidents") or []):
        key = ("incident", inc["id"], inc["state"])
        if key in seen:
            continue
        if ("incident", inc["id"]) not in seen:
            seen.add(("incident", inc["id"]))
            opened.append(inc["reason"])
            lines.append(f"{inc['id'][:8]} opened: {inc['reason']}")
        seen.add(key)
        if inc["state"] not in ("firing", "suspected"):
            lines.append(f"{inc['id'][:8]} {inc['state']}")
    for a in reversed(status.get("recent_retrains") or []):
        key = ("retrain", a["id"], a["status"])
        if key in seen or a["status"] == "running":
            continue
        seen.add(key)
        lines.append(f"retrain {a['status']} v{a.get('challenger_version')} on {a.get('rows')} rows")
    return lines, opened


def _fmt(x: Any, spec: str = ".3f") -> str:
    return "  -  " if x is None else format(x, spec)


def run_stream(url: str, service: Service, batches: Iterable[Batch], *, token: str | None = None,
               check_timeout: float = 300.0, echo: Callable[[str], None] = print,
               progress_every: float = PROGRESS_EVERY) -> StreamResult:
    """Send ``batches`` through ``service`` to the daemon at ``url``; labels one batch late. A
    running retrain's progress is a timeline line every ``progress_every`` seconds."""
    started = time.monotonic()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    steps: list[Step] = []
    seen: set[tuple] = set()
    pending: Batch | None = None
    last_id: int | None = None
    labelled_after_onset = 0
    head = f"{'batch':>5} {'phase':<10} {'served':>6} {'correct':>7} {'check':>5} {'labelled':>8} {'accuracy':>8} " \
           f"{'drifted':<10} {'s':>4}  events"
    echo(head)
    echo("-" * len(head))
    with httpx.Client(base_url=url, headers=headers, timeout=30.0) as http:
        for number, batch in enumerate(batches):
            version, predicted = service.predict(batch.rows)
            correct = float(np.mean(np.asarray(predicted, dtype=object) == batch.rows["label"].astype(str).to_numpy()))
            if pending is not None:
                service.outcomes(pending.rows[["request_id", "label"]])
                labelled_after_onset += len(pending.rows) if pending.drifted else 0
            pending = batch
            status = _next_check(http, last_id, time.time(), check_timeout, echo, progress_every)
            check = status.get("last_check") or {}
            last_id = check.get("id", last_id)
            lines, opened = _events(status, seen)
            step = Step(number, batch.drifted, version, correct, labelled_after_onset, check, lines, opened,
                        time.monotonic() - started)
            steps.append(step)
            drifted = ",".join(check.get("drifted_features") or []) or "-"
            echo(f"{number:>5} {'drifted' if batch.drifted else 'stationary':<10} {'v' + version:>6} "
                 f"{correct:>7.3f} {check.get('id') or '-':>5} {check.get('labelled_rows') or 0:>8} "
                 f"{_fmt(check.get('accuracy')):>8} {drifted[:10]:<10} {step.seconds:>4.0f}  {'; '.join(lines)}")
        final = _status(http)
    return StreamResult(steps, list(final.get("recent_incidents") or []), list(final.get("recent_retrains") or []),
                        time.monotonic() - started)


@contextmanager
def serving(app: Any, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Run an ASGI ``app`` with uvicorn in a thread on ``host`` (``port`` 0: a free one); yields its URL."""
    import socket
    import threading

    import uvicorn
    if port == 0:
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, name="example-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the server for {app!r} did not start")
        time.sleep(0.05)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
