"""Multi-process training with ``torchrun``: which rank we are, and the process group.

``torchrun --nproc_per_node N -m trainer.worker ...`` (or ``... -m monitor.cli train ...``) sets
``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE``; :func:`init` joins the group (NCCL on CUDA, gloo on
CPU). Every rank trains on its shard; only rank 0 logs to MLflow and writes checkpoints.
"""
from __future__ import annotations

import atexit
import gc
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def from_env() -> Dist:
    """The current process's place in the job, from torchrun's environment (single process if unset)."""
    if dist.is_available() and dist.is_initialized():
        return Dist(dist.get_rank(), int(os.environ.get("LOCAL_RANK", 0)), dist.get_world_size())
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return Dist(int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0")), world)


def init(device_type: str) -> Dist:
    """Join the process group when launched by torchrun; a no-op for a single process."""
    info = from_env()
    if info.enabled and not dist.is_initialized():
        backend = "nccl" if device_type == "cuda" else "gloo"
        if device_type == "cuda":
            torch.cuda.set_device(info.local_rank)
        dist.init_process_group(backend=backend)
        atexit.register(shutdown)
    return info


def shutdown() -> None:
    """Leave the process group at exit.

    A finished ``DistributedDataParallel`` wrapper sits in reference cycles (its hooks point back
    at it), so its reducer, and the gloo/NCCL group it holds, would outlive ``destroy_process_group``
    and be torn down among C++ static destructors, where gloo aborts the process now and then
    ("terminate called without an active exception", exit -6). torchrun then SIGTERMs the other
    ranks, rank 0 included, possibly while it logs to MLflow. Collecting first releases the group
    while the interpreter is still whole."""
    if dist.is_available() and dist.is_initialized():
        gc.collect()
        dist.destroy_process_group()


def any_rank(flag: bool, info: Dist, device: torch.device) -> bool:
    """True on every rank if ``flag`` is true on any: ranks must agree to stop at the same step,
    or the ones still training would wait forever in the next all-reduce."""
    if not info.enabled:
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())
