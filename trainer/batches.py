"""The forms training rows come in and the batches drawn from them: ``(inputs..., y)`` tensors or a
Dataset of ``(x, y)`` items; each epoch's training batches in :class:`ShardedBatches`' order,
already on the device (where the rows live is :func:`trainer.loop.placement`'s choice), and
evaluation batches bounded by bytes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import DataLoader, TensorDataset, default_collate

from trainer.sampling import ShardedBatches

if TYPE_CHECKING:
    from trainer.loop_records import LoopConfig

# Validation rows read through a Dataset (a user's training.entrypoint) are stacked into tensors once,
# when they take at most this many bytes: evaluation items (train=False) do not vary, so each
# epoch's evaluation is then indexing, not file reads. Larger sets are read batch by batch.
STACK_BYTES = 256 * 2**20
# An evaluation forward sees at most this many input bytes (an image batch must not be 65,536 rows).
EVAL_BATCH_BYTES = 64 * 2**20


def _split_batch(batch: Any) -> tuple[torch.Tensor, ...]:
    """A collated ``(x, y)`` batch as ``(inputs..., y)``: x a tensor or a tuple/list of tensors."""
    x, y = batch
    return (*x, y) if isinstance(x, (list, tuple)) else (x, y)


def collate_of(data: Any) -> Any:
    """How a Dataset's items become a batch: its own ``collate`` (a user's ``collate``, see
    trainer/entrypoint_model.py) where it has one, else torch's ``default_collate``."""
    return getattr(data, "collate", None) or default_collate


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
    if isinstance(data, tuple) or len(data) == 0 or getattr(data, "collate", None) is not None:
        return data  # a collate of its own: variable-length items (padded per batch) do not stack
    first = _split_batch(default_collate([data[0]]))
    if sum(t.element_size() * t.nelement() for t in first) * len(data) > limit:
        return data
    return _split_batch(default_collate([data[i] for i in range(len(data))]))


def eval_batches(data: Any, batch_size: int | None, num_workers: int = 0):
    if not isinstance(data, tuple):
        loader = DataLoader(data, batch_size=batch_size or 256, collate_fn=collate_of(data), num_workers=num_workers)
        yield from (_split_batch(b) for b in loader)
        return
    if batch_size is None:  # bounded by bytes: a row of an image is not a row of a table
        row = sum(t[:1].element_size() * t[:1].nelement() for t in data[:-1]) or 1
        batch_size = int(max(1, min(65536, EVAL_BATCH_BYTES // row)))
    for i in range(0, len(data[-1]), batch_size):
        yield tuple(t[i:i + batch_size] for t in data)


def epoch_batches(data: Any, where: str, sampler: ShardedBatches, device: torch.device, cfg: LoopConfig):
    """This epoch's batches as ``(inputs..., y)``, in ShardedBatches' order, already on ``device``."""
    if not isinstance(data, tuple):  # a Dataset: the same index batches, items collated by torch's rule
        if where == "dataset":
            for idx in sampler:
                batch = _split_batch(collate_of(data)([data[i] for i in idx.tolist()]))
                yield tuple(t.to(device, non_blocking=True) for t in batch)
            return
        loader = DataLoader(data, batch_sampler=[idx.tolist() for idx in sampler], collate_fn=collate_of(data),
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
