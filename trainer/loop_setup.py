"""What :func:`trainer.loop.fit` sets up besides the device and precision (trainer/runtime.py): the
learning-rate schedule, gradient checkpointing and the progress bar.
"""
from __future__ import annotations

import logging
import math
import sys
from typing import Any, Callable, cast

from torch import nn

from trainer import distributed
from trainer.loop_records import LoopConfig

log = logging.getLogger("trainer.loop")  # the loop's messages keep the loop's logger name


def enable_gradient_checkpointing(model: nn.Module) -> None:
    for module in (model, getattr(model, "net", None)):
        if module is not None and getattr(module, "supports_checkpointing", False):
            cast(Any, module).set_gradient_checkpointing(True)  # the flag above says it has one
            return
    log.warning("training.gradient_checkpointing is on but the model does not support it; ignored")


def cosine(total_steps: int, min_ratio: float) -> Callable[[int], float]:
    def factor(step: int) -> float:
        progress = min(step / max(total_steps, 1), 1.0)
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
    return factor


class _NoBar:
    """What the loop calls on a progress bar, doing nothing (no tqdm import when there is no bar:
    a GPU host with only torch, numpy and pandas can run the loop)."""

    def update(self, n: int) -> None: ...
    def set_postfix(self, **kwargs: Any) -> None: ...
    def close(self) -> None: ...


def progress_bar(cfg: LoopConfig, info: distributed.Dist, total: int, initial: int):
    if not (cfg.progress and info.is_main and sys.stderr.isatty()):
        return _NoBar()
    from tqdm import tqdm
    return tqdm(total=total, initial=initial, unit="sample", unit_scale=True, dynamic_ncols=True,
                file=sys.stderr, leave=False)
