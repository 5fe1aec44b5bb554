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
"""
from __future__ import annotations

import copy
import dataclasses
import logging
import math
import os
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, Callable, TypeVar, cast

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, default_collate

from trainer import distributed
from trainer.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from trainer.metrics import binary_metrics
from trainer.runtime import StopOnSignal, resolve_amp, resolve_device, seed_everything
from trainer.sampling import ShardedBatches

log = logging.getLogger(__name__)

EXIT_INTERRUPTED = 75  # EX_TEMPFAIL: "interrupted, checkpoint saved, run again with --resume"

# Loop settings that may differ between an interrupted run and its resumption.
_OPERATIONAL = {"progress", "num_workers", "checkpoint_every_minutes", "threads", "compile"}
# Training tensors are moved to the GPU once when they take at most this share of its free memory.
DEVICE_BUDGET = 0.25
# Validation rows read through a Dataset (a user's training.entrypoint) are stacked into tensors once,
# when they take at most this many bytes: evaluation items (train=False) do not vary, so each
# epoch's evaluation is then indexing, not file reads. Larger sets are read batch by batch.
STACK_BYTES = 256 * 2**20
# An evaluation forward sees at most this many input bytes (an image batch must not be 65,536 rows).
EVAL_BATCH_BYTES = 64 * 2**20


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
    progress: bool = True
    threads: int = 0  # CPU threads; 0 keeps torch's default
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


class TrainingInterrupted(Exception):
    """Training stopped on request (signal or hook) after writing ``checkpoint``."""

    def __init__(self, checkpoint: Path | None, signum: int | None = None):
        where = f"checkpoint saved to {checkpoint}" if checkpoint else "no checkpoint path was given"
        super().__init__(f"training interrupted ({where}); run again with --resume to continue")
        self.checkpoint = checkpoint
        self.signum = signum


class CheckpointMismatch(ValueError):
    """The checkpoint was written for other data or other training settings."""


# Multiclass class weights (inverse frequency, n / (K * n_k)) are clipped to this range: a class
# with 1 % of the rows would otherwise weigh 20x-100x and its few rows (often noisy) would steer
# every step; clipped, a rare class still counts up to 10x, and a balanced set gets 1 everywhere.
CLASS_WEIGHT_RANGE = (0.1, 10.0)
# Regression learns the standardised target with the Huber loss (delta 1 standard deviation):
# quadratic near the fit like MSE, linear in the tails so a few wild labels do not steer a
# step. Measured on y = 3 sin(x0) + x1^2 + x2/2 + N(0, 0.5) (2000 rows, 6 features, the default
# MLP, 3 seeds), test MAE on clean labels: 0.505 Huber vs 0.512 MSE; with 2 % of the training
# labels off by 10 sd: 0.582 vs 0.775. So Huber: no worse on clean noise, far better on bad labels.
HUBER_DELTA = 1.0


def task_of(model: nn.Module) -> str:
    """The model's task; a network without one (a model pickled before tasks) is binary."""
    return str(getattr(model, "task", "binary"))


def class_weights(y: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Per-class weights of the multiclass loss from the training targets (see CLASS_WEIGHT_RANGE)."""
    counts = torch.bincount(y.reshape(-1).cpu(), minlength=n_classes)[:n_classes].to(torch.float64)
    weights = torch.where(counts > 0, len(y) / (n_classes * counts.clamp(min=1)), torch.ones_like(counts))
    return weights.clamp(*CLASS_WEIGHT_RANGE).to(torch.float32)


def task_loss(task: str, raw: torch.Tensor, y: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
    """The training loss of a raw output (fp32, mean over the rows): BCE with logits (binary),
    cross-entropy with class weights (multiclass), Huber on the standardised target (regression)."""
    if task == "multiclass":
        return F.cross_entropy(raw.float(), y, weight=weight)
    if task == "regression":
        return F.huber_loss(raw.float(), y, delta=HUBER_DELTA)
    return F.binary_cross_entropy_with_logits(raw.float(), y)


def _n_outputs(model: nn.Module, y: torch.Tensor) -> int:
    n = getattr(model, "n_outputs", None)
    return int(n) if n else int(y.max().item()) + 1


def _split_batch(batch: Any) -> tuple[torch.Tensor, ...]:
    """A collated ``(x, y)`` batch as ``(inputs..., y)``: x a tensor or a tuple/list of tensors."""
    x, y = batch
    return (*x, y) if isinstance(x, (list, tuple)) else (x, y)


def targets_of(data: Any) -> torch.Tensor:
    """Every label of the rows: the last tensor, a Dataset's ``targets``, or (slowly) each item's y."""
    if isinstance(data, tuple):
        return data[-1]
    found = getattr(data, "targets", None)
    if found is not None:
        return torch.as_tensor(found)
    return torch.stack([torch.as_tensor(data[i][1]) for i in range(len(data))])


def stacked(data: Any, limit: int = STACK_BYTES) -> Any:
    """``data`` as ``(inputs..., y)`` tensors when it is a Dataset whose items take at most ``limit``
    bytes together (see STACK_BYTES); otherwise ``data`` unchanged."""
    if isinstance(data, tuple) or len(data) == 0:
        return data
    first = _split_batch(default_collate([data[0]]))
    if sum(t.element_size() * t.nelement() for t in first) * len(data) > limit:
        return data
    return _split_batch(default_collate([data[i] for i in range(len(data))]))


def _eval_batches(data: Any, batch_size: int | None, num_workers: int = 0):
    if not isinstance(data, tuple):
        loader = DataLoader(data, batch_size=batch_size or 256, collate_fn=default_collate, num_workers=num_workers)
        yield from (_split_batch(b) for b in loader)
        return
    if batch_size is None:  # bounded by bytes: a row of an image is not a row of a table
        row = sum(t[:1].element_size() * t[:1].nelement() for t in data[:-1]) or 1
        batch_size = int(max(1, min(65536, EVAL_BATCH_BYTES // row)))
    for i in range(0, len(data[-1]), batch_size):
        yield tuple(t[i:i + batch_size] for t in data)


@torch.no_grad()
def evaluate(model: nn.Module, data: Any, device: torch.device,
             amp_dtype: torch.dtype | None = None, batch_size: int | None = None,
             num_workers: int = 0) -> dict[str, float]:
    """The early-stopping loss of ``model`` on ``data`` (``(inputs..., y)`` tensors, e.g.
    ``(x_num, x_cat, y)``, or a Dataset of ``(x, y)``) and the task's figures:
    binary log loss, accuracy, ROC AUC; multiclass cross-entropy (unweighted: the log loss of the
    probabilities served), accuracy, macro ROC AUC; regression the MSE on the standardised target,
    MAE and RMSE in the target's units."""
    was_training = model.training
    model.eval()
    task = task_of(model)
    logits, ys = [], []
    for *inputs, y_b in _eval_batches(data, batch_size, num_workers):
        with torch.autocast(device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            logits.append(model(*(t.to(device) for t in inputs)).float())
        ys.append(y_b)
    model.train(was_training)
    y = torch.cat(ys) if ys else targets_of(data)
    logits_t = torch.cat(logits) if logits else torch.zeros(0, device=device)
    if task == "multiclass":
        from trainer.metrics import task_metrics
        loss = F.cross_entropy(logits_t, y.to(device)).item() if len(y) else math.nan
        out = task_metrics(task, y.numpy(), torch.softmax(logits_t, dim=-1).cpu().numpy())
        return {"loss": loss, "accuracy": out["accuracy"], "roc_auc": out["roc_auc"]}
    if task == "regression":
        loss = F.mse_loss(logits_t, y.to(device).float()).item() if len(y) else math.nan
        scale = float(cast(Any, model).target_std)
        err = (logits_t - y.to(device).float()).abs() * scale
        mae = err.mean().item() if len(y) else math.nan
        return {"loss": loss, "mae": mae, "rmse": math.sqrt(loss) * scale if len(y) else math.nan}
    loss = F.binary_cross_entropy_with_logits(logits_t, y.to(device).float()).item() if len(y) else math.nan
    out = binary_metrics(y.numpy(), torch.sigmoid(logits_t).cpu().numpy())
    return {"loss": loss, "accuracy": out["accuracy"], "roc_auc": out["roc_auc"]}


def _enable_gradient_checkpointing(model: nn.Module) -> None:
    for module in (model, getattr(model, "net", None)):
        if module is not None and getattr(module, "supports_checkpointing", False):
            cast(Any, module).set_gradient_checkpointing(True)  # the flag above says it has one
            return
    log.warning("training.gradient_checkpointing is on but the model does not support it; ignored")


def _cosine(total_steps: int, min_ratio: float) -> Callable[[int], float]:
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


def _progress_bar(cfg: LoopConfig, info: distributed.Dist, total: int, initial: int):
    if not (cfg.progress and info.is_main and sys.stderr.isatty()):
        return _NoBar()
    from tqdm import tqdm
    return tqdm(total=total, initial=initial, unit="sample", unit_scale=True, dynamic_ncols=True,
                file=sys.stderr, leave=False)


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


def _epoch_batches(data: Any, where: str, sampler: ShardedBatches, device: torch.device, cfg: LoopConfig):
    """This epoch's batches as ``(inputs..., y)``, in ShardedBatches' order, already on ``device``."""
    if not isinstance(data, tuple):  # a Dataset: the same index batches, items collated by torch's rule
        if where == "dataset":
            for idx in sampler:
                batch = _split_batch(default_collate([data[i] for i in idx.tolist()]))
                yield tuple(t.to(device, non_blocking=True) for t in batch)
            return
        loader = DataLoader(data, batch_sampler=[idx.tolist() for idx in sampler], collate_fn=default_collate,
                            num_workers=cfg.num_workers, pin_memory=device.type == "cuda", generator=torch.Generator())
        for batch in loader:
            yield tuple(t.to(device, non_blocking=True) for t in _split_batch(batch))
        return
    if where == "loader":
        # A generator of our own keeps the DataLoader from drawing its seed from the global RNG.
        loader = DataLoader(TensorDataset(*data), sampler=sampler, batch_size=None, num_workers=cfg.num_workers,
                            pin_memory=device.type == "cuda", generator=torch.Generator())
        for batch in loader:
            yield tuple(t.to(device, non_blocking=True) for t in batch)
        return
    order = sampler.indices()
    if where == "device" and order.device != data[0].device:
        order = order.to(data[0].device, non_blocking=True)  # one copy per epoch, not one per batch
    for idx in order.split(cfg.batch_size)[sampler.skip_batches:]:
        if where == "device":
            yield tuple(t[idx] for t in data)
            continue
        pinned = []
        for t in data:
            buf = torch.empty((len(idx), *t.shape[1:]), dtype=t.dtype, pin_memory=True)
            pinned.append(torch.index_select(t, 0, idx, out=buf).to(device, non_blocking=True))
        yield tuple(pinned)


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
    if cfg.threads:
        # Small models gain little from intra-op threads, and on a busy machine extra threads spin.
        torch.set_num_threads(cfg.threads)
    if cfg.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS needs it for determinism
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False
    seed_everything(cfg.seed + info.rank)  # ranks drop out different units; DDP syncs the weights

    model.to(device)
    if cfg.gradient_checkpointing:
        _enable_gradient_checkpointing(model)
    net: nn.Module = model
    if info.enabled:
        from torch.nn.parallel import DistributedDataParallel
        net = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    task = task_of(model)
    # Multiclass: inverse-frequency class weights from all training rows (every rank sees the same).
    if task == "multiclass":
        labels = targets_of(train)
        weight: torch.Tensor | None = class_weights(labels, _n_outputs(model, labels)).to(device)
    else:
        weight = None
    dataset = TensorDataset(*train) if isinstance(train, tuple) else train
    val = stacked(val)
    per_rank = math.ceil(len(dataset) / info.world_size)
    steps_per_epoch = math.ceil(math.ceil(per_rank / cfg.batch_size) / cfg.grad_accum_steps)
    where = placement(train, device, cfg.num_workers)
    data = tuple(t.to(device) for t in train) if where == "device" and isinstance(train, tuple) else train
    log.debug("training rows: %s (%s)", where, device)
    # Fused AdamW on CUDA: one kernel for all parameters, and GradScaler hands it found_inf instead of
    # reading it back each step (a CPU-GPU sync). CPU keeps the default, so CPU results do not change.
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay,
                                  fused=True if device.type == "cuda" else None)  # None: torch's default
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _cosine(cfg.epochs * steps_per_epoch, cfg.min_lr_ratio))
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
    bar = _progress_bar(cfg, info, cfg.epochs * per_rank * info.world_size, state.samples * info.world_size)
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
                batches = _epoch_batches(data, where, sampler, device, cfg)
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
                    bar.update(rows * info.world_size)

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
                record = {"epoch": epoch + 1, "train_loss": loss_sum.item() / max(state.epoch_samples, 1),
                          **{f"val_{k}": v for k, v in val_metrics.items()}, "lr": float(scheduler.get_last_lr()[0])}
                state.history.append(record)
                if val_metrics["loss"] < state.best_val_loss:
                    state.best_val_loss, state.best_epoch, state.bad_epochs = val_metrics["loss"], epoch + 1, 0
                    best_weights = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
                else:
                    state.bad_epochs += 1
                state.stopped_early = distributed.any_rank(state.bad_epochs >= cfg.patience, info, device)
                state.epoch, state.epoch_batches, state.epoch_samples, state.epoch_loss_sum = epoch + 1, 0, 0, 0.0
                bar.set_postfix(epoch=epoch + 1, val_loss=f"{val_metrics['loss']:.4f}")
                if on_epoch_end is not None and info.is_main:
                    on_epoch_end(record)
                checkpoint()
                last_checkpoint = clock()
                if stop.signum is not None:
                    raise TrainingInterrupted(checkpoint_path, stop.signum)
    finally:
        bar.close()
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
