"""The training loop. Read it top to bottom: set up, maybe resume, then for each epoch: accumulate
forward/backward under autocast, unscale, clip, step, update, zero grads; evaluate, early-stop,
checkpoint. Knows nothing about MLflow or driftloop's config (torch, numpy, pandas only).

Preemption: SIGTERM or SIGINT sets a flag; at the next optimizer step the loop writes a checkpoint
and raises :class:`TrainingInterrupted` (the CLI exits with :data:`EXIT_INTERRUPTED`). Calling
:func:`fit` again with ``resume=True`` continues from that step; on CPU with the same seed the final
weights are bitwise identical to an uninterrupted run (the epoch's sample order is recomputed from
``seed + epoch`` and the consumed batches are skipped; every RNG comes back from the checkpoint).

Where the rows live (:func:`placement`): when the training tensors fit in a quarter of the device's
free memory (always, on CPU) they are moved there once and each batch is one indexing op on the
device: no DataLoader, no per-batch host-to-device copy. Otherwise each batch is gathered into pinned
host memory and copied with ``non_blocking``, which overlaps with the previous step's kernels. The
DataLoader is used only when ``num_workers`` asks for worker processes. Nothing in a step waits for
the GPU: the loss is summed on the device and read once per epoch (or per checkpoint), and on CUDA
the optimizer is fused AdamW, which lets the GradScaler skip its per-step ``found_inf`` sync.

Beside it, each importable from here as before: the loop's records (trainer/loop_records.py), its
batches (trainer/batches.py), the losses and evaluation (trainer/objective.py) and the set-up
helpers (trainer/loop_setup.py).
"""
from __future__ import annotations

import copy
import dataclasses
import logging
import math
import os
import time
from contextlib import nullcontext
from itertools import islice
from pathlib import Path
from typing import Any, Callable, TypeVar, cast

import torch
from torch import nn
from torch.utils.data import TensorDataset

from monitor.errors import DataError
from trainer import distributed
# The loop's parts; "X as X" marks a name re-exported for those who import it from here.
from trainer.batches import EVAL_BATCH_BYTES as EVAL_BATCH_BYTES, STACK_BYTES as STACK_BYTES
from trainer.batches import epoch_batches, stacked, targets_of
from trainer.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from trainer.loop_records import FitResult as FitResult, LoopConfig as LoopConfig, LoopState as LoopState
from trainer.loop_setup import Progress, cosine, cpu_threads, enable_gradient_checkpointing
from trainer.objective import CLASS_WEIGHT_RANGE as CLASS_WEIGHT_RANGE, HUBER_DELTA as HUBER_DELTA
from trainer.objective import class_weights as class_weights, evaluate, model_task, n_outputs, task_loss
from trainer.runtime import StopOnSignal, resolve_amp, resolve_device, seed_everything
from trainer.sampling import ShardedBatches

log = logging.getLogger(__name__)

EXIT_INTERRUPTED = 75  # EX_TEMPFAIL: "interrupted, checkpoint saved, run again with --resume"

# Loop settings that may differ between an interrupted run and its resumption.
_OPERATIONAL = {"progress", "num_workers", "checkpoint_every_minutes", "threads", "compile"}
# Training tensors are moved to the GPU once when they take at most this share of its free memory.
DEVICE_BUDGET = 0.25


class TrainingInterrupted(Exception):
    """Training stopped on request (signal or hook) after writing ``checkpoint``."""

    def __init__(self, checkpoint: Path | None, signum: int | None = None):
        where = f"checkpoint saved to {checkpoint}" if checkpoint else "no checkpoint path was given"
        super().__init__(f"training interrupted ({where}); run again with --resume to continue")
        self.checkpoint = checkpoint
        self.signum = signum


class CheckpointMismatch(ValueError):
    """The checkpoint was written for other data or other training settings."""


class NonFiniteLoss(DataError):
    """An epoch's training or validation loss is NaN or infinite: the network's outputs (or the
    loss of them) are not finite. Training stops there, before any weights are kept or registered."""

    def __init__(self, epoch: int, train_loss: float, val_loss: float):
        bad = [name for name, v in (("training", train_loss), ("validation", val_loss)) if not math.isfinite(v)]
        which = "training and validation losses are" if len(bad) == 2 else f"{bad[0]} loss is"
        super().__init__(
            f"epoch {epoch}: the {which} not finite (train_loss {train_loss}, val_loss {val_loss}): "
            "the network's outputs or their loss became NaN or infinite; training stopped and nothing was "
            "registered (check the data for extreme values, lower training.learning_rate, set training.grad_clip, "
            "or, for your own training code, its forward)")
        self.epoch, self.train_loss, self.val_loss = epoch, train_loss, val_loss


def placement(train: Any, device: torch.device, num_workers: int = 0) -> str:
    """Where the training rows are read from: ``"device"`` (moved once, batches indexed in place),
    ``"pinned"`` (gathered into pinned host memory, copied without blocking), ``"loader"`` (a
    DataLoader with ``num_workers`` worker processes) or ``"dataset"`` (a Dataset's items read in
    this process and collated: no worker start-up, and augmentation draws from this process's RNG,
    so a resumed run is bit-identical)."""
    if num_workers > 0:
        return "loader"
    if not isinstance(train, tuple):
        return "dataset"
    if device.type != "cuda":
        return "device"  # the rows already are where the math happens
    need = sum(t.element_size() * t.nelement() for t in train)
    free, _ = torch.cuda.mem_get_info(device)
    return "device" if need <= DEVICE_BUDGET * free else "pinned"


def peek_checkpoint(path: Path) -> dict[str, Any] | None:
    """The ``extra`` dict stored with a checkpoint (e.g. the MLflow run id), or None if there is none."""
    return load_checkpoint(path).get("extra", {}) if Path(path).exists() else None


def fit(model: nn.Module, train: Any, val: Any, cfg: LoopConfig, *,
        checkpoint_path: Path | None = None, resume: bool = False, fingerprint: str = "",
        extra: dict[str, Any] | None = None, on_epoch_end: Callable[[dict[str, float]], None] | None = None,
        should_stop: Callable[[LoopState], bool] | None = None,
        clock: Callable[[], float] = time.monotonic) -> FitResult:
    """Train ``model`` (called as ``model(*inputs) -> raw output``) on ``train``: ``(inputs..., y)``
    tensors (e.g. ``(x_num, x_cat, y)`` from :func:`trainer.data.tensors`) or a Dataset of ``(x, y)``
    items (a user's ``training.entrypoint``), with the loss of its ``task`` (:func:`task_loss`),
    early-stopping on the validation loss over ``val`` (the same forms; a small Dataset is stacked
    once, see STACK_BYTES); the model ends with its best weights.

    ``should_stop(state)`` is checked after every optimizer step, like a signal: when it returns
    True the loop checkpoints and raises :class:`TrainingInterrupted`. ``extra`` is stored in the
    checkpoint (read it back with :func:`peek_checkpoint`). ``on_epoch_end`` runs on rank 0 only.
    """
    info = distributed.from_env()
    device = resolve_device(cfg.device, info)
    distributed.init(device.type)  # joins the process group under torchrun; no-op otherwise
    amp_dtype = resolve_amp(cfg.amp, device)
    previous_determinism, previous_threads = torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()
    threads = cpu_threads(cfg, model, device, dense=isinstance(train, tuple))
    if threads:
        # A small model gains nothing from intra-op threads, and on a busy machine they wait on each other.
        torch.set_num_threads(threads)
    if cfg.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS needs it for determinism
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False
    seed_everything(cfg.seed + info.rank)  # ranks drop out different units; DDP syncs the weights

    model.to(device)
    if cfg.gradient_checkpointing:
        enable_gradient_checkpointing(model)
    net: nn.Module = model
    if info.enabled:
        from torch.nn.parallel import DistributedDataParallel
        net = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    task = model_task(model)
    # The loss's class weights (multiclass: inverse frequency), from all training rows (every rank sees the same).
    weight: torch.Tensor | None = task.loss_weight(lambda: targets_of(train), lambda y: n_outputs(model, y), device)
    dataset = TensorDataset(*train) if isinstance(train, tuple) else train
    val = stacked(val)
    val_rows = len(val[-1]) if isinstance(val, tuple) else len(val)  # none: the validation loss is NaN, not wrong
    per_rank = math.ceil(len(dataset) / info.world_size)
    steps_per_epoch = math.ceil(math.ceil(per_rank / cfg.batch_size) / cfg.grad_accum_steps)
    where = placement(train, device, cfg.num_workers)
    data = tuple(t.to(device) for t in train) if where == "device" and isinstance(train, tuple) else train
    log.debug("training rows: %s (%s, %s CPU threads)", where, device, torch.get_num_threads())
    # Fused AdamW on CUDA: one kernel for all parameters, and GradScaler hands it found_inf instead of
    # reading it back each step (a CPU-GPU sync). CPU keeps the default, so CPU results do not change.
    # A user's network may group its parameters (a head's own learning rate; a frozen backbone left out).
    grouping = getattr(model, "param_groups", None)
    groups = grouping(cfg.learning_rate) if callable(grouping) else model.parameters()
    optimizer = torch.optim.AdamW(groups, lr=cfg.learning_rate, weight_decay=cfg.weight_decay,
                                  fused=True if device.type == "cuda" else None)  # None: torch's default
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, cosine(cfg.epochs * steps_per_epoch, cfg.min_lr_ratio))
    # A disabled scaler is a no-op pass-through: one code path for fp32, bf16 and fp16.
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype is torch.float16)
    state = LoopState()
    best_weights = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}

    def checkpoint() -> None:
        if checkpoint_path is None or not info.is_main:
            return
        save_checkpoint(checkpoint_path, {
            "model": model.state_dict(), "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict(),
            "scheduler": scheduler.state_dict(), "state": dataclasses.asdict(state), "best_weights": best_weights,
            "rng": rng_state(), "config": dataclasses.asdict(cfg), "fingerprint": fingerprint, "extra": extra or {},
        })

    if resume and checkpoint_path is not None and Path(checkpoint_path).exists():
        saved = load_checkpoint(checkpoint_path)
        changed = sorted(k for k, v in saved["config"].items() if k not in _OPERATIONAL and getattr(cfg, k, v) != v)
        if saved["fingerprint"] != fingerprint or changed:
            what = f"settings changed: {', '.join(changed)}" if changed else "the training data differ"
            raise CheckpointMismatch(f"{checkpoint_path} does not match this run ({what}); "
                                     "delete it or run without --resume")
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        scaler.load_state_dict(saved["scaler"])
        scheduler.load_state_dict(saved["scheduler"])
        state = LoopState(**saved["state"])
        best_weights = saved["best_weights"]
        set_rng_state(saved["rng"])
        log.info("resumed from %s at epoch %d, step %d", checkpoint_path, state.epoch + 1, state.step)

    params = [p for p in model.parameters() if p.requires_grad]
    if cfg.compile:
        # checkpoints keep saving ``model``: its state_dict keys do not change
        net = cast(nn.Module, torch.compile(net))
    # One context, re-entered each micro-batch; a disabled autocast would still cost a call per step.
    autocast = torch.autocast(device.type, dtype=amp_dtype) if amp_dtype is not None else nullcontext()
    stop = StopOnSignal()
    last_checkpoint = clock()
    started, samples_at_start = time.perf_counter(), state.samples
    progress = Progress(cfg, info, cfg.epochs * per_rank * info.world_size, state.samples * info.world_size,
                        state.epoch, clock)
    try:
        with stop:
            for epoch in range(state.epoch, cfg.epochs):
                if state.stopped_early:
                    break
                state.epoch = epoch
                sampler = ShardedBatches(cast(TensorDataset, dataset), info, cfg.seed, epoch, cfg.batch_size,
                                         state.epoch_batches)
                loss_sum = torch.tensor(state.epoch_loss_sum, dtype=torch.float64, device=device)
                model.train()
                batches = epoch_batches(data, where, sampler, device, cfg)
                while micro := list(islice(batches, cfg.grad_accum_steps)):
                    rows = sum(len(b[-1]) for b in micro)  # shapes are known on the host: no sync
                    for i, (*inputs, y) in enumerate(micro):
                        # Under DDP, all-reduce gradients only after the last micro-batch of the step.
                        sync = cast("DistributedDataParallel", net).no_sync() if info.enabled and i < len(micro) - 1 \
                            else nullcontext()
                        with sync:
                            with autocast:
                                logits = net(*inputs)
                            # Mean over the micro-batch, weighted by its share of the step's rows.
                            loss = task_loss(task, logits, y, weight)
                            if len(micro) > 1:
                                loss = loss * (len(y) / rows)
                            scaler.scale(loss).backward()
                        loss_sum.add_(loss.detach(), alpha=rows)  # stays on device: no sync point here
                    if cfg.grad_clip is not None:
                        scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
                        torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
                    scaler.step(optimizer)  # skipped if fp16 gradients overflowed
                    scaler.update()
                    optimizer.zero_grad(set_to_none=True)
                    scheduler.step()
                    state.step += 1
                    state.epoch_batches += len(micro)
                    state.epoch_samples += rows
                    state.samples += rows
                    progress.update(rows * info.world_size)

                    requested = stop.signum is not None or (should_stop is not None and should_stop(state))
                    if distributed.any_rank(requested, info, device):
                        state.epoch_loss_sum = loss_sum.item()
                        checkpoint()
                        raise TrainingInterrupted(checkpoint_path, stop.signum)
                    if clock() - last_checkpoint >= cfg.checkpoint_every_minutes * 60:
                        state.epoch_loss_sum = loss_sum.item()  # a CPU-GPU sync point, once per checkpoint
                        checkpoint()
                        last_checkpoint = clock()

                # End of epoch: evaluate, early-stop, checkpoint.
                val_metrics = evaluate(model, val, device, amp_dtype, num_workers=cfg.num_workers)
                train_loss = loss_sum.item() / max(state.epoch_samples, 1)  # the epoch's one read of the loss
                # Checked here, once per epoch: a per-step check would sync with the device every step.
                # Every rank agrees, or the ones still training would wait forever in the next all-reduce.
                finite = math.isfinite(train_loss) and (val_rows == 0 or math.isfinite(val_metrics["loss"]))
                if distributed.any_rank(not finite, info, device):
                    raise NonFiniteLoss(epoch + 1, train_loss, val_metrics["loss"])
                record = {"epoch": epoch + 1, "train_loss": train_loss,
                          **{f"val_{k}": v for k, v in val_metrics.items()}, "lr": float(scheduler.get_last_lr()[0])}
                state.history.append(record)
                improved = val_metrics["loss"] < state.best_val_loss
                if improved:
                    state.best_val_loss, state.best_epoch, state.bad_epochs = val_metrics["loss"], epoch + 1, 0
                    best_weights = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
                else:
                    state.bad_epochs += 1
                state.stopped_early = distributed.any_rank(state.bad_epochs >= cfg.patience, info, device)
                state.epoch, state.epoch_batches, state.epoch_samples, state.epoch_loss_sum = epoch + 1, 0, 0, 0.0
                progress.epoch_end(record, improved=improved, stopped_early=state.stopped_early)
                if on_epoch_end is not None and info.is_main:
                    on_epoch_end(record)
                checkpoint()
                last_checkpoint = clock()
                if stop.signum is not None:
                    raise TrainingInterrupted(checkpoint_path, stop.signum)
    finally:
        progress.close()
        torch.use_deterministic_algorithms(previous_determinism)
        torch.set_num_threads(previous_threads)

    elapsed = time.perf_counter() - started
    model.load_state_dict(best_weights)
    if checkpoint_path is not None and info.is_main:
        Path(checkpoint_path).unlink(missing_ok=True)  # finished: a later --resume must not pick it up
    return FitResult(history=state.history, best_epoch=state.best_epoch, best_val_loss=state.best_val_loss,
                     epochs_run=len(state.history), steps=state.step, stopped_early=state.stopped_early,
                     train_seconds=elapsed,
                     samples_per_second=(state.samples - samples_at_start) * info.world_size / max(elapsed, 1e-9))


_M = TypeVar("_M", bound=nn.Module)


def copy_model(model: _M) -> _M:
    """A deep copy on CPU (warm starts must not train the cached champion in place)."""
    return copy.deepcopy(model).cpu()
