"""The digits example's model, as a driftloop training entrypoint (``training.entrypoint:
examples.digits.model:Digits``): driftloop's trainer runs this code, with its own loop (AMP, grad
accumulation, checkpoints, early stopping, MLflow, the gate), on the rows' image files.

The protocol (docs/guide/images-text.md):

- ``build_model(task, n_outputs)``: a small CNN, two 3x3 conv layers, a 32-d penultimate layer and
  a linear head; ``forward`` returns ``[N, 10]`` logits.
- ``dataset(refs, train)``: item i is the image behind ``refs[i]`` (its ``input_uri``) as a
  ``[1, 8, 8]`` float tensor; with ``train=True`` a random shift of up to one pixel and ink scaled
  by 0.85..1.15, drawn from torch's RNG so a resumed run draws the same changes.
- ``embed(model, x)``: the penultimate layer, ``[N, 32]``: what the service sends as ``image_emb``
  and what driftloop compares for embedding drift.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from examples.digits.data import read_image

EMBEDDING_DIM = 32


class DigitsNet(nn.Module):
    def __init__(self, n_outputs: int, dim: int = EMBEDDING_DIM):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),   # 32 x 4 x 4
            nn.Flatten(), nn.Linear(32 * 4 * 4, dim), nn.ReLU(),
        )
        self.head = nn.Linear(dim, n_outputs)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


@lru_cache(maxsize=50_000)
def _pixels(ref: str) -> np.ndarray:
    """An image file, decoded once per process: here an image never changes (a new image is a new
    file), and decoding a PNG costs more than the CNN's step on it. 50,000 8x8 images are 13 MB."""
    return read_image(ref)


class ImageFiles(Dataset):
    """The images behind ``refs``, read when asked for (a large image set would not fit in memory:
    the pattern to copy), each file decoded once per process."""

    def __init__(self, refs: Sequence[str], train: bool):
        self.refs = list(refs)
        self.train = train

    def __len__(self) -> int:
        return len(self.refs)

    def __getitem__(self, i: int) -> torch.Tensor:
        x = torch.tensor(_pixels(self.refs[i])).unsqueeze(0)  # [1, 8, 8] in 0..1 (a copy: the cache's stays)
        if self.train:  # torch's RNG: driftloop seeds and checkpoints it, so a resume is bit-identical
            dy, dx = (int(v) for v in torch.randint(-1, 2, (2,)))
            x = nn.functional.pad(x, (1, 1, 1, 1))[:, 1 + dy:9 + dy, 1 + dx:9 + dx]  # zeros come in
            x = (x * (0.85 + 0.3 * torch.rand(()))).clamp(0.0, 1.0)  # lighter or darker ink
        return x


class Digits:
    """The entrypoint object driftloop instantiates (no arguments)."""

    embedding_feature = "image_emb"

    def build_model(self, task: str, n_outputs: int) -> nn.Module:
        if task != "multiclass":
            raise ValueError(f"the digits model is a multiclass classifier, not {task}")
        return DigitsNet(n_outputs)

    def dataset(self, refs: Sequence[str], train: bool) -> Dataset:
        return ImageFiles(refs, train)

    def embed(self, model: nn.Module, x: torch.Tensor) -> torch.Tensor:
        assert isinstance(model, DigitsNet), type(model)
        return model.embed(x)
