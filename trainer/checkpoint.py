"""Complete, atomic training checkpoints.

Complete: model, optimizer, GradScaler, LR scheduler, the loop's own state (epoch, step, position
in the epoch, early-stopping state with the best weights so far), every RNG (python, numpy, torch,
CUDA), the loop config and a fingerprint of the data. Atomic: written to a temporary file in the
same folder, fsynced, then ``os.replace``d over the old one, so a crash or a SIGKILL mid-write
leaves the previous checkpoint intact, never a torn one.

Loaded with ``torch.load(weights_only=True)``: a checkpoint holds tensors and plain containers
only (numpy's RNG state is stored as a tensor), so loading one cannot execute code.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from monitor.files import PRIVATE, atomic_writer

FORMAT_VERSION = 1


def rng_state() -> dict[str, Any]:
    kind, keys, pos, has_gauss, cached = cast(tuple, np.random.get_state())  # the legacy 5-tuple form
    state = {
        "python": random.getstate(),
        "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached": float(cached)},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` to ``path`` atomically (temp file + fsync + os.replace + fsync of the folder)."""
    with atomic_writer(path, mode=PRIVATE, binary=True) as f:
        torch.save({"format": FORMAT_VERSION, **payload}, f)


def load_checkpoint(path: Path) -> dict[str, Any]:
    payload = torch.load(Path(path), map_location="cpu", weights_only=True)
    if payload.get("format") != FORMAT_VERSION:
        raise ValueError(f"{path}: checkpoint format {payload.get('format')!r}, expected {FORMAT_VERSION}")
    return payload
