"""What :func:`trainer.loop.fit` sets up besides the device and precision (trainer/runtime.py): the
learning-rate schedule, gradient checkpointing, the CPU threads and what a person sees of a run
(:class:`Progress`: a line per epoch in the log, a bar on a terminal).
"""
from __future__ import annotations

import logging
import math
import sys
from dataclasses import dataclass
from typing import Any, Callable, cast

import torch
from torch import nn

from trainer import distributed
from trainer.loop_records import LoopConfig

log = logging.getLogger("trainer.loop")  # the loop's messages keep the loop's logger name

# Below this many floating-point operations per micro-batch (forward and backward: about 6 per
# parameter per row for a dense network) training runs on one CPU thread. Each of a step's few dozen
# ops waits for every intra-op thread, and at this size an op takes microseconds: a second thread
# saves nothing, and on a shared machine each wait for a thread that is not scheduled costs a time
# slice. The default MLP (3,300 parameters, 64 rows: 1.3 MFLOP) on the 2-core machine under load:
# 1.4 ms per step on one thread, 47 ms on two (a 1,000x larger step, 1.7 GFLOP: 29 ms vs 269 ms).
ONE_THREAD_FLOPS = 1e9


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


def cpu_threads(cfg: LoopConfig, model: nn.Module, device: torch.device, *, dense: bool) -> int:
    """The CPU threads to train with, 0 for torch's default (one per core): ``training.threads``
    when set; otherwise one for a ``dense`` network (rows as tensors: the MLP, a ``model.factory``
    network) on the CPU whose micro-batch is under :data:`ONE_THREAD_FLOPS`. A
    ``training.entrypoint`` network keeps torch's default: its cost is not its parameter count (a
    convolution reuses its weights across the image)."""
    if cfg.threads or device.type != "cpu" or not dense:
        return cfg.threads
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return 1 if 6 * params * cfg.batch_size < ONE_THREAD_FLOPS else 0


class _NoBar:
    """What the loop calls on a progress bar, doing nothing (no tqdm import when there is no bar:
    a GPU host with only torch, numpy and pandas can run the loop)."""

    def update(self, n: int) -> None: ...
    def set_postfix(self, **kwargs: Any) -> None: ...
    def clear(self) -> None: ...
    def refresh(self) -> None: ...
    def close(self) -> None: ...


def progress_bar(cfg: LoopConfig, info: distributed.Dist, total: int, initial: int) -> Any:
    if not (cfg.progress and info.is_main and sys.stderr.isatty()):
        return _NoBar()
    from tqdm import tqdm
    return tqdm(total=total, initial=initial, unit="sample", unit_scale=True, dynamic_ncols=True,
                file=sys.stderr, leave=False)


@dataclass(frozen=True)
class EpochProgress:
    """Where a run stands after an epoch: what its log line says."""
    epoch: int  # 1-based
    epochs: int  # training.epochs: the most there can be
    seconds: float  # since this process started training (a resumed run: since it resumed)
    left: float  # at most, at the mean epoch time so far; 0 when it stops here
    improved: bool  # the best validation loss so far
    stopped_early: bool


class Progress:
    """What a person sees of a training run, on rank 0: after each epoch one line in the log with
    the epoch of ``training.epochs``, the losses and figures under their MLflow names, the time taken
    and at most how long is left (early stopping may end it sooner); at INFO when
    ``training.progress`` is on, DEBUG when off (``--quiet``). The record carries the
    :class:`EpochProgress` as ``progress``. On a terminal a bar of samples too, cleared while a line
    is written. Reads ``clock`` (the loop's) for the times."""

    def __init__(self, cfg: LoopConfig, info: distributed.Dist, total: int, initial: int, first_epoch: int,
                 clock: Callable[[], float]):
        self.cfg, self.info, self.clock = cfg, info, clock
        self.first_epoch, self.started = first_epoch, clock()
        self.level = logging.INFO if cfg.progress else logging.DEBUG
        self.bar = progress_bar(cfg, info, total, initial)

    def update(self, samples: int) -> None:
        self.bar.update(samples)

    def epoch_end(self, record: dict[str, float], *, improved: bool, stopped_early: bool) -> EpochProgress:
        epoch = int(record["epoch"])
        seconds = self.clock() - self.started
        per_epoch = seconds / max(epoch - self.first_epoch, 1)
        left = 0.0 if stopped_early else per_epoch * (self.cfg.epochs - epoch)
        done = EpochProgress(epoch, self.cfg.epochs, seconds, left, improved, stopped_early)
        self.bar.set_postfix(epoch=epoch, val_loss=f"{record.get('val_loss', math.nan):.4f}")
        if self.info.is_main and log.isEnabledFor(self.level):
            self.bar.clear()
            log.log(self.level, "%s", epoch_line(record, done, self.cfg.patience), extra={"progress": done})
            self.bar.refresh()
        return done

    def close(self) -> None:
        self.bar.close()


def epoch_line(record: dict[str, float], done: EpochProgress, patience: int) -> str:
    """e.g. ``epoch 3/60: train_loss 0.8123, val_loss 0.8011 (best), val_accuracy 0.6120,
    val_roc_auc 0.7920; 12 s, at most 3 min 58 s left``."""
    figures = [f"train_loss {record['train_loss']:.4f}"] if "train_loss" in record else []
    for name, value in record.items():
        if name.startswith("val_"):
            figures.append(f"{name} {value:.4f}" + (" (best)" if name == "val_loss" and done.improved else ""))
    if done.stopped_early:
        when = f"stopping early: no better val_loss in {patience} epochs"
    elif done.epoch >= done.epochs:
        when = "the last epoch"
    else:
        when = f"at most {duration(done.left)} left"
    return f"epoch {done.epoch}/{done.epochs}: {', '.join(figures)}; {duration(done.seconds)}, {when}"


def duration(seconds: float) -> str:
    """``12 s``, ``3 min 58 s``, ``1 h 02 min``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"
