"""The training loop's records: its settings (:class:`LoopConfig`), the state a checkpoint carries
so a run can resume (:class:`LoopState`) and what :func:`trainer.loop.fit` returns
(:class:`FitResult`). Importable from :mod:`trainer.loop` as before.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class LoopConfig:
    epochs: int = 30
    batch_size: int = 256  # per process and micro-batch: a step sees batch_size * grad_accum_steps * world rows
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    patience: int = 5
    seed: int = 42
    deterministic: bool = False
    amp: str = "auto"  # auto (fp16 on CUDA, off on CPU) | off | bf16 | fp16
    grad_accum_steps: int = 1
    grad_clip: float | None = 1.0
    num_workers: int = 0
    device: str = "auto"
    checkpoint_every_minutes: float = 5.0
    gradient_checkpointing: bool = False
    progress: bool = True  # a line per epoch in the log at INFO (off: DEBUG), a bar on a terminal
    threads: int = 0  # CPU threads; 0: one for a small dense network on the CPU, else torch's (cpu_threads)
    min_lr_ratio: float = 0.1  # cosine decay ends at learning_rate * min_lr_ratio
    compile: bool = False  # torch.compile the model for training (the first steps pay for compilation)

    @classmethod
    def from_training(cls, training: Any, **overrides: Any) -> "LoopConfig":
        """From a ``TrainingConfig`` (any object with matching attribute names), with overrides."""
        values = {f.name: getattr(training, f.name) for f in dataclasses.fields(cls) if hasattr(training, f.name)}
        return cls(**{**values, **overrides})


@dataclass
class LoopState:
    epoch: int = 0  # the epoch in progress (0-based)
    epoch_batches: int = 0  # micro-batches of that epoch already trained on
    epoch_samples: int = 0
    epoch_loss_sum: float = 0.0
    step: int = 0  # optimizer steps taken
    samples: int = 0  # training rows seen by this process
    best_val_loss: float = math.inf
    best_epoch: int = 0
    bad_epochs: int = 0
    stopped_early: bool = False
    history: list[dict[str, float]] = field(default_factory=list)


@dataclass
class FitResult:
    # One record per epoch: train_loss, val_loss, lr and the task's figures from evaluate (classifiers
    # val_accuracy, val_roc_auc; regression val_mae, val_rmse).
    history: list[dict[str, float]]
    best_epoch: int
    best_val_loss: float
    epochs_run: int
    steps: int
    stopped_early: bool
    train_seconds: float
    samples_per_second: float  # all processes together
