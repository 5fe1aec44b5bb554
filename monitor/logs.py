"""Logging set-up, done once by the CLI. Library code only calls ``logging.getLogger(__name__)``."""
from __future__ import annotations

import contextvars
import json
import logging
import os
import sys
import time
from contextlib import contextmanager
from typing import Iterator

# The model a line is about, in a deployment of several (set around each model's jobs and requests).
MODEL: contextvars.ContextVar[str | None] = contextvars.ContextVar("driftloop_model", default=None)
# Whether lines name their model: only when a daemon hosts several (a single model's logs are unchanged).
many_models = False


@contextmanager
def about_model(name: str) -> Iterator[None]:
    """Log lines written inside are about model ``name``."""
    token = MODEL.set(name)
    try:
        yield
    finally:
        MODEL.reset(token)


class _ModelFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        model = MODEL.get() if many_models else None
        record.model = model
        record.model_prefix = f"[{model}] " if model else ""
        return True


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        model = getattr(record, "model", None)
        if model:
            out["model"] = model
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out)


def setup_logging(level: str = "INFO", fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(model_prefix)s%(message)s",
                                               "%H:%M:%S"))
    handler.addFilter(_ModelFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # MLflow configures its own loggers when first imported (later, lazily): tell it through its variable.
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", logging.getLevelName(max(logging.WARNING, root.level)))
    # Third-party chatter that drowns our own lines at INFO.
    for noisy in ("alembic", "mlflow", "urllib3", "apscheduler.executors", "apscheduler.scheduler", "httpx",
                  "uvicorn.access"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
