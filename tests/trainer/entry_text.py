"""Users' own text networks for ``training.entrypoint``: token ids of variable length, declared with
``input_spec`` and batched by their own ``collate``. Each text is a ``.txt`` file of words (the
row's ``input_uri``); a word's id is its CRC-32 in a tiny vocabulary (0 is padding).

- :class:`BagText`: an ``nn.EmbeddingBag`` over the ids of a batch concatenated, with offsets.
- :class:`PaddedText`: an ``nn.Embedding`` and a masked mean over ids padded per batch, with a mask.
Also objects whose declarations or outputs do not fit the config, for the train-time checks."""
from __future__ import annotations

import zlib
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.utils.data import Dataset

from trainer.entrypoint_model import InputSpec

VOCAB, DIM = 64, 8
POSITIVE = ["good", "great", "fine", "nice", "happy", "bright"]
NEGATIVE = ["bad", "awful", "poor", "sad", "dull", "grim"]
NEUTRAL = ["the", "a", "movie", "was", "plot", "and", "it"]


def token_ids(text: str) -> torch.Tensor:
    return torch.tensor([1 + zlib.crc32(w.encode()) % (VOCAB - 1) for w in text.split()], dtype=torch.int64)


class Texts(Dataset):
    def __init__(self, refs: Sequence[str]):
        self.refs = list(refs)

    def __len__(self) -> int:
        return len(self.refs)

    def __getitem__(self, i: int) -> torch.Tensor:
        return token_ids(Path(self.refs[i]).read_text())


class Bag(nn.Module):
    def __init__(self, n_outputs: int):
        super().__init__()
        self.bag = nn.EmbeddingBag(VOCAB, DIM, mode="mean")
        self.head = nn.Linear(DIM, n_outputs)

    def forward(self, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.head(self.bag(ids, offsets))


class BagText:
    """Ids of a batch concatenated, with each text's offset: no padding."""
    embedding_feature = "text"
    input_spec = [InputSpec("ids", "int64", ("tokens",)), {"name": "offsets", "dtype": "int64", "shape": ["batch"]}]

    def build_model(self, task: str, n_outputs: int) -> nn.Module:
        return Bag(n_outputs)

    def dataset(self, refs: Sequence[str], train: bool) -> Dataset:
        return Texts(refs)

    def collate(self, items: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        lengths = torch.tensor([0] + [len(t) for t in items[:-1]], dtype=torch.int64)
        return torch.cat(items), lengths.cumsum(0)

    def embed(self, model: nn.Module, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return model.bag(ids, offsets)  # type: ignore[operator]


class MeanPool(nn.Module):
    def __init__(self, n_outputs: int, width: int = DIM):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, width, padding_idx=0)
        self.head = nn.Linear(width, n_outputs)

    def pooled(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        weights = mask.to(torch.float32).unsqueeze(-1)
        return (self.embedding(ids) * weights).sum(1) / weights.sum(1).clamp(min=1.0)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.head(self.pooled(ids, mask))


class PaddedText:
    """Ids padded to the longest text of each batch, with a mask: the sequence axis varies."""
    embedding_feature = "text"

    def input_spec(self) -> list[InputSpec]:
        return [InputSpec("ids", "int64", ("batch", "tokens")), InputSpec("mask", "bool", ("batch", "tokens"))]

    def build_model(self, task: str, n_outputs: int) -> nn.Module:
        return MeanPool(n_outputs)

    def dataset(self, refs: Sequence[str], train: bool) -> Dataset:
        return Texts(refs)

    def collate(self, items: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        ids = nn.utils.rnn.pad_sequence(items, batch_first=True, padding_value=0)
        return ids, ids != 0

    def embed(self, model: nn.Module, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return model.pooled(ids, mask)  # type: ignore[operator]


class FloatIds(PaddedText):
    """Declares float ids: the dataset yields int64."""

    def input_spec(self) -> list[InputSpec]:
        return [InputSpec("ids", "float32", ("batch", "tokens")), InputSpec("mask", "bool", ("batch", "tokens"))]


class ThreeOutputs(PaddedText):
    """A network with three outputs whatever the task asks for."""

    def build_model(self, task: str, n_outputs: int) -> nn.Module:
        return MeanPool(3)


class WideEmbedding(PaddedText):
    """An embedding of 2 * DIM values."""

    def build_model(self, task: str, n_outputs: int) -> nn.Module:
        return MeanPool(n_outputs, width=2 * DIM)


def write_texts(directory: Path, count: int, seed: int = 0) -> pd.DataFrame:
    """``count`` texts of 2 to 12 words as ``.txt`` files: ``id``, ``input_uri`` and ``label``
    ("pos" or "neg", from the sentiment words they hold)."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(count):
        label = ["neg", "pos"][int(rng.integers(2))]
        words = list(rng.choice(POSITIVE if label == "pos" else NEGATIVE, size=int(rng.integers(1, 4))))
        words += list(rng.choice(NEUTRAL, size=int(rng.integers(1, 9))))
        rng.shuffle(words)
        path = directory / f"t{i}.txt"
        path.write_text(" ".join(words))
        rows.append({"id": f"t{i}", "input_uri": str(path), "label": label})
    return pd.DataFrame(rows)
