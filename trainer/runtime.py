"""Where and how a training run executes: device, precision, seeds, and preemption signals."""
from __future__ import annotations

import logging
import random
import signal
import threading
from typing import Any

import numpy as np
import torch

from trainer import distributed

log = logging.getLogger(__name__)


def resolve_device(name: str, info: distributed.Dist) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"training.device is {name!r} but no CUDA device is available")
        if device.index is None:
            device = torch.device("cuda", info.local_rank)
    return device


def resolve_amp(amp: str, device: torch.device) -> torch.dtype | None:
    if amp == "off" or (amp == "auto" and device.type != "cuda"):
        return None
    if amp in ("auto", "fp16"):
        if device.type != "cuda":
            raise ValueError("training.amp 'fp16' needs a CUDA device; use 'bf16' on CPU")
        return torch.float16
    if amp == "bf16":
        return torch.bfloat16
    raise ValueError(f"training.amp must be auto, off, bf16 or fp16, got {amp!r}")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device


class StopOnSignal:
    """SIGTERM/SIGINT set a flag instead of killing the process; a second SIGINT interrupts at once."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "StopOnSignal":
        if threading.current_thread() is threading.main_thread():  # signal.signal only works there
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum == signal.SIGINT and signum == signal.SIGINT:
            raise KeyboardInterrupt
        log.warning("received %s: checkpointing at the next step", signal.Signals(signum).name)
        self.signum = signum

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
