"""A text network of your own, as a driftloop training entrypoint (``training.entrypoint:
examples.text.network:TopicBag``): token ids of variable length into an ``nn.EmbeddingBag``, with
no padding. Each message is a text file (its ``input_uri``, a path or ``file://`` URI).

The protocol's parts for integer, variable-length inputs (docs/guide/images-text.md, section 8):

- ``dataset(refs, train)``: item i is the message's token ids, an int64 tensor as long as the text.
- ``collate(items)``: a batch is the ids of its messages concatenated, plus each message's offset
  (where it starts), the form ``nn.EmbeddingBag`` takes: ``(ids [tokens], offsets [batch])``.
- ``input_spec``: declares those two tensors (int64; ``tokens`` and ``batch`` vary), so the ONNX
  and INT8 export feed token ids, not floats, and both axes stay dynamic in the graph.
- ``embed(model, ids, offsets)``: the mean of the message's word vectors, ``[N, 32]``.

A word's id is its BLAKE2 hash in ``VOCAB`` buckets (the hashing trick): nothing to fit or ship.
"""
from __future__ import annotations

import hashlib
from typing import Sequence

import torch
from torch import nn
from torch.utils.data import Dataset

from examples.digits.data import path_of

VOCAB, EMBEDDING_DIM = 4096, 32


def token_ids(text: str) -> torch.Tensor:
    """int64 ``[words]``: each lower-cased word's hash bucket."""
    return torch.tensor([int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little") % VOCAB
                         for w in text.lower().split()], dtype=torch.int64)


class BagOfWords(nn.Module):
    def __init__(self, n_outputs: int, dim: int = EMBEDDING_DIM):
        super().__init__()
        self.bag = nn.EmbeddingBag(VOCAB, dim, mode="mean")
        self.head = nn.Linear(dim, n_outputs)

    def forward(self, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.head(self.bag(ids, offsets))


class Messages(Dataset):
    def __init__(self, refs: Sequence[str]):
        self.refs = list(refs)

    def __len__(self) -> int:
        return len(self.refs)

    def __getitem__(self, i: int) -> torch.Tensor:
        return token_ids(path_of(self.refs[i]).read_text())


class TopicBag:
    # Plain dicts (trainer.entrypoint_model.InputSpec's fields): a model service that loads this
    # module needs no driftloop installed.
    input_spec = [{"name": "ids", "dtype": "int64", "shape": ["tokens"]},
                  {"name": "offsets", "dtype": "int64", "shape": ["batch"]}]

    def build_model(self, task: str, n_outputs: int) -> nn.Module:
        return BagOfWords(n_outputs)

    def dataset(self, refs: Sequence[str], train: bool) -> Dataset:
        return Messages(refs)

    def collate(self, items: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        starts = torch.tensor([0] + [len(ids) for ids in items[:-1]], dtype=torch.int64).cumsum(0)
        return torch.cat(items), starts

    def embed(self, model: nn.Module, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return model.bag(ids, offsets)  # type: ignore[operator]
