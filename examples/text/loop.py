"""The text example, end to end: support messages in four topics (examples/text/corpus.py), a fixed
sentence encoder in the service (examples/text/encoder.py) whose 64-d output is the ``text_emb``
embedding feature, and driftloop's own network trained on that embedding. After ``plan.before``
batches the customers' vocabulary shifts (new product names and slang): embedding drift and the
accuracy drop open an incident, a retrain on the stored embeddings learns the new words, the gate
promotes it. tests/examples/test_text_loop.py runs it through a real ``driftloop serve``.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pandas as pd

from examples.stream import Batch, HttpService, StreamResult, run_stream, serving
from examples.text.corpus import CLASSES, corpus
from examples.text.encoder import DIM, embedding_column
from monitor.config import DriftloopConfig

MODEL: dict[str, Any] = {
    "name": "topics", "task": "multiclass", "target": "label", "id": "request_id", "classes": CLASSES,
    "features": [{"name": "text_emb", "type": "embedding", "dim": DIM}],
}


@dataclass(frozen=True)
class TextPlan:
    baseline_rows: int = 2000
    batch: int = 250
    before: int = 3
    after: int = 8
    post_change_rows: int = 750  # labelled rows of the new vocabulary before the retrain starts
    shift: float = 1.0           # share of topic words from the new vocabulary after the onset
    check_interval: float = 1.0
    seed: int = 5


def settings(home: Path, port: int, plan: TextPlan) -> dict[str, Any]:
    return {
        "home": str(home),
        "logging": {"level": "WARNING"},
        "server": {"port": port, "gpu_metrics": False},
        "model": MODEL,
        "drift": {"interval_seconds": plan.check_interval, "window_size": 8 * plan.batch,
                  "min_labels": 2 * plan.batch},
        "alerts": {"cooldown_seconds": 0},
        "training": {"epochs": 30, "retrain_epochs": 15, "hidden": [64, 32], "checkpoint_every_minutes": 60,
                     "progress": False, "threads": 1, "export": {"onnx": False},
                     "min_post_change_rows": plan.post_change_rows,
                     "seed": plan.seed},
    }


def write_config(home: Path, port: int, plan: TextPlan) -> Path:
    import yaml
    home.mkdir(parents=True, exist_ok=True)
    path = home / "driftloop.yaml"
    path.write_text(yaml.safe_dump(settings(home, port, plan), sort_keys=False))
    return path


def training_table(plan: TextPlan) -> pd.DataFrame:
    """Messages of the old vocabulary with their embeddings and topics (the text itself is not a feature)."""
    rows = corpus(plan.baseline_rows, seed=plan.seed)
    rows["text_emb"] = embedding_column(rows["text"])
    return rows.drop(columns=["text"])


def batches(plan: TextPlan) -> Iterator[Batch]:
    for number in range(plan.before + plan.after):
        drifted = number >= plan.before
        rows = corpus(plan.batch, seed=plan.seed * 1000 + number + 1, shift=plan.shift if drifted else 0.0)
        yield Batch(rows, drifted)


@contextmanager
def text_service(cfg: DriftloopConfig, daemon_url: str, poll_seconds: float = 0.5) -> Iterator[HttpService]:
    from examples.text.service import create_app
    from monitor.client import Champion, DriftloopClient
    with Champion(cfg.tracking_uri, cfg.registered_model_name, interval=poll_seconds) as champion, \
            DriftloopClient(daemon_url, token=cfg.server.token) as client, \
            serving(create_app(champion, client)) as url:
        service = HttpService(url, send=lambda rows: rows[["request_id", "text"]].to_dict("records"))
        try:
            yield service
        finally:
            service.close()


def run_loop(cfg: DriftloopConfig, plan: TextPlan, daemon_url: str, *,
             echo: Callable[[str], None] = print) -> StreamResult:
    with text_service(cfg, daemon_url) as service:
        return run_stream(daemon_url, service, batches(plan), token=cfg.server.token, echo=echo)
