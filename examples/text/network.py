"""A text network of your own, as a driftloop training entrypoint (``training.entrypoint:
examples.text.network:TopicBag``): token ids of variable length into an ``nn.EmbeddingBag``, with
no padding. Each message is a text file (its ``input_uri``, a path or ``file://`` URI).

The protocol's parts for integer, variable-length inputs (docs/guide/images-text.md, section 9):

- ``dataset(refs, train, artifacts)``: item i is the message's token ids, an int64 tensor as long
  as the text (``artifacts`` None: driftloop checks that the message reads, before a first train).
- ``collate(items)``: a batch is the ids of its messages concatenated, plus each message's offset
  (where it starts), the form ``nn.EmbeddingBag`` takes: ``(ids [tokens], offsets [batch])``.
- ``input_spec``: declares those two tensors (int64; ``tokens`` and ``batch`` vary), so the ONNX
  and INT8 export feed token ids, not floats, and both axes stay dynamic in the graph.
- ``embed(model, ids, offsets)``: the mean of the message's word vectors, ``[N, 32]``.

And its tokenizer, an artifact that travels with every version (section 10):

- ``prepare_artifacts(refs, previous, out)``: writes ``vocabulary.json``, the words of the training
  messages in id order: the previous version's words first (a retrain), then the new ones, so an old
  word keeps its id and its trained row of the ``EmbeddingBag`` when the champion is fine-tuned.
- ``build_model(task, n_outputs, artifacts)``: one embedding row per id of the vocabulary.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Sequence

import torch
from torch import nn
from torch.utils.data import Dataset

from examples.digits.data import path_of

EMBEDDING_DIM = 32
VOCABULARY = "vocabulary.json"  # the artifact: {"words": [...]}, word i's id is i + 1


def words_of(text: str) -> list[str]:
    return text.lower().split()


class Vocabulary:
    """Words and their ids: ``words[i]`` is id ``i + 1``, and 0 stands for every word it lacks
    (a message's unseen words share one trained row). :meth:`grown` only appends, so an id never
    changes its word."""

    def __init__(self, words: Sequence[str] = ()):
        self.words = list(words)
        self.index = {w: i + 1 for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        """The number of ids, 0 included: the embedding's rows."""
        return len(self.words) + 1

    def grown(self, texts: Iterable[str]) -> "Vocabulary":
        """This vocabulary with the texts' new words appended, in the order they first appear."""
        new = dict.fromkeys(w for text in texts for w in words_of(text) if w not in self.index)
        return Vocabulary([*self.words, *new])

    def ids(self, text: str) -> torch.Tensor:
        """int64 ``[words]``: each lower-cased word's id (0 for a word the vocabulary lacks)."""
        return torch.tensor([self.index.get(w, 0) for w in words_of(text)], dtype=torch.int64)

    @classmethod
    def read(cls, folder: Path) -> "Vocabulary":
        return cls(json.loads((Path(folder) / VOCABULARY).read_text())["words"])

    def write(self, folder: Path) -> None:
        (Path(folder) / VOCABULARY).write_text(json.dumps({"words": self.words}))


class BagOfWords(nn.Module):
    def __init__(self, vocabulary: int, n_outputs: int, dim: int = EMBEDDING_DIM):
        super().__init__()
        self.bag = nn.EmbeddingBag(vocabulary, dim, mode="mean")
        self.head = nn.Linear(dim, n_outputs)

    def forward(self, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.head(self.bag(ids, offsets))


class Messages(Dataset):
    def __init__(self, refs: Sequence[str], vocabulary: Vocabulary):
        self.refs, self.vocabulary = list(refs), vocabulary

    def __len__(self) -> int:
        return len(self.refs)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.vocabulary.ids(path_of(self.refs[i]).read_text())


class TopicBag:
    # Plain dicts (trainer.entrypoint_model.InputSpec's fields): a model service that loads this
    # module needs no driftloop installed.
    input_spec = [{"name": "ids", "dtype": "int64", "shape": ["tokens"]},
                  {"name": "offsets", "dtype": "int64", "shape": ["batch"]}]

    def prepare_artifacts(self, refs: Sequence[str], previous: Path | None, out: Path) -> None:
        known = Vocabulary() if previous is None else Vocabulary.read(previous)
        known.grown(path_of(ref).read_text() for ref in refs).write(out)

    def build_model(self, task: str, n_outputs: int, artifacts: Path) -> nn.Module:
        return BagOfWords(len(Vocabulary.read(artifacts)), n_outputs)

    def dataset(self, refs: Sequence[str], train: bool, artifacts: Path | None) -> Dataset:
        # None: driftloop only checks that each message reads, before the first vocabulary exists.
        return Messages(refs, Vocabulary() if artifacts is None else Vocabulary.read(artifacts))

    def collate(self, items: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        starts = torch.tensor([0] + [len(ids) for ids in items[:-1]], dtype=torch.int64).cumsum(0)
        return torch.cat(items), starts

    def embed(self, model: nn.Module, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return model.bag(ids, offsets)  # type: ignore[operator]
