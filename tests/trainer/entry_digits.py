"""A user's own training code for ``training.entrypoint = "tests.trainer.entry_digits:Digits"``: a
tiny CNN on sklearn's 8x8 digits, each image a ``.npy`` file whose path is the row's ``input_uri``.
Also objects that break the protocol, for the loading errors, and a network that does not trace."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.utils.data import Dataset

EMBEDDING_DIM = 16
# Weights of every network's first training forward, in order: a test reads where a retrain started.
FIRST_TRAINING_WEIGHTS: list[dict[str, torch.Tensor]] = []


class SmallCNN(nn.Module):
    def __init__(self, n_outputs: int):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.Flatten(),
                                      nn.Linear(16 * 4 * 4, EMBEDDING_DIM), nn.ReLU())
        self.head = nn.Linear(EMBEDDING_DIM, n_outputs)
        self.seen = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and not self.seen:
            self.seen = True
            FIRST_TRAINING_WEIGHTS.append({k: v.detach().clone() for k, v in self.state_dict().items()})
        return self.head(self.features(x))


class Images(Dataset):
    """``[1, 8, 8]`` float tensors read from ``.npy`` files; training items get a little noise from
    torch's RNG (so a resumed run must restore it to be bit-identical)."""

    def __init__(self, refs: Sequence[str], train: bool):
        self.refs, self.train = list(refs), train

    def __len__(self) -> int:
        return len(self.refs)

    def __getitem__(self, i: int) -> torch.Tensor:
        x = torch.from_numpy(np.load(self.refs[i])).float().div(16.0).unsqueeze(0)
        return x + 0.05 * torch.randn_like(x) if self.train else x


class Digits:
    embedding_feature = "cnn"

    def build_model(self, task: str, n_outputs: int) -> nn.Module:
        return SmallCNN(n_outputs)

    def dataset(self, refs: Sequence[str], train: bool) -> Dataset:
        return Images(refs, train)

    def embed(self, model: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return model.features(x)  # type: ignore[operator]


class Branchy(SmallCNN):
    """Takes a Python branch on the batch's values: tracing cannot follow it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = super().forward(x)
        return out * 2 if x.mean() > 100 else out


class BranchyDigits(Digits):
    def build_model(self, task: str, n_outputs: int) -> nn.Module:
        return Branchy(n_outputs)


class NoDataset:
    def build_model(self, task: str, n_outputs: int) -> nn.Module:
        return SmallCNN(n_outputs)


class NotAModule(Digits):
    def build_model(self, task: str, n_outputs: int):  # type: ignore[override]
        return "a string"


def write_digits(directory: Path, *, rotate: int = 0, start: int = 0, count: int | None = None,
                 seed: int = 0) -> pd.DataFrame:
    """sklearn's digits as ``.npy`` files under ``directory`` (rotated by ``rotate`` quarter turns), in a
    shuffled order: a frame of ``id``, ``input_uri`` and ``label`` (the digit as a class name)."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    order = np.random.default_rng(seed).permutation(len(digits.images))[start:None if count is None else start + count]
    directory.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in order:
        path = directory / f"d{i}-r{rotate}.npy"
        np.save(path, np.rot90(digits.images[i], rotate).astype(np.float32))
        rows.append({"id": f"d{i}-r{rotate}", "input_uri": str(path), "label": str(digits.target[i])})
    return pd.DataFrame(rows)
