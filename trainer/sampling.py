"""The order training rows are visited in: per-epoch permutations, sharded per rank, resumable."""
from __future__ import annotations

import math
from collections.abc import Sized
from typing import cast

import torch
from torch.utils.data import DistributedSampler, TensorDataset

from trainer import distributed


class ShardedBatches(DistributedSampler):
    """DistributedSampler's order (a permutation fixed by ``seed + epoch``, one shard per rank) cut
    into batches of row indices, optionally starting part-way through the epoch so a resumed run
    sees exactly the batches an uninterrupted one would. Batches are index *tensors*: the dataset
    is gathered with one indexing op per tensor instead of one ``__getitem__`` per row."""

    def __init__(self, dataset: TensorDataset, info: distributed.Dist, seed: int, epoch: int, batch_size: int,
                 skip_batches: int = 0):
        super().__init__(dataset, num_replicas=info.world_size, rank=info.rank, shuffle=True, seed=seed)
        self.set_epoch(epoch)
        self.batch_size = batch_size
        self.skip_batches = skip_batches

    def indices(self) -> torch.Tensor:
        """DistributedSampler.__iter__'s order, computed as a tensor (no million-element Python list)."""
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(cast(Sized, self.dataset)), generator=g)
        padding = self.total_size - len(order)
        if padding > 0:  # every rank gets the same number of rows: wrap around, as DistributedSampler does
            order = torch.cat([order] * (1 + math.ceil(padding / len(order))))[: self.total_size]
        return order[self.rank:self.total_size:self.num_replicas]

    def __iter__(self):
        return iter(self.indices().split(self.batch_size)[self.skip_batches:])

    def __len__(self) -> int:
        return max(0, math.ceil(self.num_samples / self.batch_size) - self.skip_batches)
