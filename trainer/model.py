"""The model: preprocessing (standard scaling, categorical vocabularies with an "unknown" bucket)
wrapped around a network, so a saved model takes a raw DataFrame and nothing else.

This module imports only torch, numpy, pandas and its two parts, trainer/features.py (reading the
raw columns) and trainer/task_head.py (:class:`TaskHead`), whose names it re-exports: all three
are pickled *by value* into the MLflow model (see trainer/pyfunc.py), so serving needs neither
driftloop nor its configuration.

Missing values are part of the input, not an error: a missing number is imputed with the
training mean (0 after standardising) and, for each numeric feature that had missing values in
the training rows, flagged in a missing-indicator input learned like any other; a categorical
feature with missing training values gets a vocabulary entry (``MISSING``) with its own embedding,
otherwise a missing category falls into the unknown bucket. An indicator is only added where the
training data can teach its weight: one that was never 1 in training would add an untrained
weight the first time it is. So the raw row a service scored, nulls and all, is the row the
model is retrained on, and data without gaps gets exactly the network it had before.

An embedding feature (``{type: embedding, dim: N}``: a sentence encoder's or an image model's
vector, the frame contract's object column of float32 arrays) enters as ``N`` more numeric inputs,
each standardised on the training rows like a numeric feature; a missing vector is all zeros (the
training mean) and, when training rows had missing vectors, one missing indicator for the whole
vector. That is how a text or image model enters the loop "through embeddings": the encoder runs
upstream, this network is the head. Inputs are ordered numeric features, then each embedding's
components, then the indicators.

A network (the default :class:`MLP`, or a user's own from ``model.factory = "pkg.mod:build"``)
is called as ``net(x_num, x_cat) -> raw output`` where ``x_num`` is ``float32 [B, n_numeric]``,
already standardised and imputed, followed by the 0/1 missing indicators (a factory's
``n_numeric`` counts all: ``len(numeric) + sum(embedding dims) + len(indicated)``), and ``x_cat`` is
``int64 [B, n_categorical]`` with 0 meaning unknown. A factory is called as
``build(n_numeric, cardinalities, training_cfg)``;
``cardinalities[i]`` counts the unknown bucket. A network that sets ``supports_checkpointing = True`` and has
``set_gradient_checkpointing(flag)`` gets gradient checkpointing when the config asks for it.

The model's ``task`` decides what the network's raw output is and what is served (:meth:`TabularModel.output`):

============  =============================  =========================================
task          raw output (``forward``)       served (``output``, ``predict_proba``)
============  =============================  =========================================
binary        one logit ``[B]``              P(class 1) ``[B]`` (sigmoid)
multiclass    one logit per class ``[B, K]``  class probabilities ``[B, K]`` (softmax),
                                             columns in the order of ``classes``
regression    the standardised value ``[B]``  the value in the target's units ``[B]``
============  =============================  =========================================

A regression model trains on the standardised target (``(y - target_mean) / target_std``, both
buffers fitted on the training rows) so one learning rate suits a price in dollars and a rate in
percent. A multiclass factory is called with ``n_outputs=K`` as a keyword. A model pickled before
tasks existed has no ``task`` attribute: it is binary (``getattr(model, "task", "binary")``).
"""
from __future__ import annotations

from typing import Sequence, cast

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from trainer.features import MISSING, UNKNOWN, category_text, embedding_values, numeric_values
from trainer.task_head import TaskHead, head_for


#: A value a warm start adds to its champion's vocabulary appears in at least this many of its rows
#: (:func:`grow_vocabulary`): a one-off id teaches an embedding nothing but noise.
MIN_NEW_CATEGORY_ROWS = 5


def embedding_dim(cardinality: int) -> int:
    return int(min(16, max(2, round(1.6 * cardinality ** 0.56))))  # fastai's rule of thumb, capped


class MLP(nn.Module):
    """Embeddings for categoricals, concatenated with numerics, then Linear-ReLU-Dropout blocks."""

    supports_checkpointing = True

    def __init__(self, n_numeric: int, cardinalities: Sequence[int], hidden: Sequence[int] = (64, 32),
                 dropout: float = 0.1, n_outputs: int = 1):
        super().__init__()
        embeddings = [nn.Embedding(c, embedding_dim(c)) for c in cardinalities]
        self.embeddings = nn.ModuleList(embeddings)
        with torch.no_grad():  # the unknown bucket never trains; zero keeps it neutral
            for emb in embeddings:
                emb.weight[UNKNOWN].zero_()
        width = n_numeric + sum(e.embedding_dim for e in embeddings)
        blocks = []
        for h in hidden:
            blocks.append(nn.Sequential(nn.Linear(width, h), nn.ReLU(), nn.Dropout(dropout)))
            width = h
        self.blocks = nn.ModuleList(blocks)
        self.head = nn.Linear(width, n_outputs)
        self.n_outputs = n_outputs
        self.gradient_checkpointing = False

    def set_gradient_checkpointing(self, enabled: bool) -> None:
        self.gradient_checkpointing = enabled

    def forward(self, x_num: torch.Tensor, x_cat: torch.Tensor) -> torch.Tensor:
        parts = [x_num] + [emb(x_cat[:, i]) for i, emb in enumerate(self.embeddings)]
        x = torch.cat(parts, dim=1)
        for block in self.blocks:
            if self.gradient_checkpointing and self.training and x.requires_grad:
                # Trades a second forward of the block for not keeping its activations.
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        out = self.head(x)
        return out.squeeze(-1) if self.n_outputs == 1 else out


class TabularModel(TaskHead, nn.Module):
    """Preprocessing + network. ``predict_proba(df)`` is the whole serving path."""

    mean: torch.Tensor  # buffers (register_buffer): moved with the module, saved in its state dict
    std: torch.Tensor

    def __init__(self, net: nn.Module, numeric: Sequence[str], categorical: Sequence[str],
                 vocab: dict[str, list[str]], mean: np.ndarray, std: np.ndarray, indicated: Sequence[str] = (), *,
                 task: str = "binary", classes: Sequence[str] | None = None,
                 target_scaling: tuple[float, float] = (0.0, 1.0), embeddings: dict[str, int] | None = None):
        super().__init__()
        head_for(task).check_classes(classes)  # ValueError for an unknown task too
        self.net = net
        self.task = str(task)  # the name: a pickled model holds a plain string
        self._class_names = None if classes is None else [str(c) for c in classes]
        # Embedding features and their dims, in input order after the numeric features.
        self.embeddings = dict(embeddings or {})
        # Features with a missing-indicator input (see module doc), as positions in the numeric block
        # (an embedding's first component: a missing vector is missing as a whole).
        starts = {c: j for j, c in enumerate(numeric)}
        offset = len(starts)
        for name, dim in self.embeddings.items():
            starts[name], offset = offset, offset + dim
        self.indicated = [starts[c] for c in indicated]
        self.numeric = list(numeric)
        self.categorical = list(categorical)
        self.vocab = {k: list(v) for k, v in vocab.items()}
        self._index = {k: {v: i + 1 for i, v in enumerate(vals)} for k, vals in self.vocab.items()}
        self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32))
        self.register_buffer("std", torch.as_tensor(std, dtype=torch.float32))
        self.register_target_scaling(target_scaling)

    @property
    def feature_names(self) -> list[str]:
        return self.numeric + self.categorical + list(self.embeddings)

    @property
    def cardinalities(self) -> list[int]:
        return [len(self.vocab[c]) + 1 for c in self.categorical]

    @staticmethod
    def preprocessing_from(df: pd.DataFrame, numeric: Sequence[str], categorical: Sequence[str],
                           embeddings: dict[str, int] | None = None):
        """Fit scaling statistics and vocabularies on training data: ``(vocab, mean, std)``; the
        statistics cover the numeric features, then each embedding's components."""
        values = np.concatenate([numeric_values(df, numeric),
                                 *(embedding_values(df[c], d).astype(np.float64)
                                   for c, d in (embeddings or {}).items())],
                                axis=1)
        present = ~np.isnan(values)
        if present.all():  # no gaps: numpy's own mean and std, as models always had
            mean = values.mean(axis=0) if len(df) else np.zeros(values.shape[1])
            std = values.std(axis=0) if len(df) else np.ones(values.shape[1])
        else:
            counts = present.sum(axis=0)
            filled = np.where(present, values, 0.0)
            mean = np.divide(filled.sum(axis=0), counts, out=np.zeros(values.shape[1]), where=counts > 0)
            var = np.divide((np.where(present, values - mean, 0.0) ** 2).sum(axis=0), counts,
                            out=np.ones(values.shape[1]), where=counts > 0)
            std = np.sqrt(var)
        std = np.where(std > 1e-12, std, 1.0)  # a constant column stays constant (0), not NaN
        vocab = {}
        for c in categorical:
            text = category_text(df[c])
            known = sorted({v for v in text if v is not None})
            vocab[c] = ([MISSING] if None in text else []) + known
        return vocab, mean, std

    def encode(self, df: pd.DataFrame) -> tuple[torch.Tensor, torch.Tensor]:
        """Raw features -> (numeric float32 [n, k], category indices int64 [n, m]); unseen -> 0."""
        absent = [c for c in self.feature_names if c not in df.columns]
        if absent:
            raise ValueError(f"missing feature columns: {', '.join(absent)}")
        num = numeric_values(df, self.numeric).astype(np.float32)
        if self.embeddings:
            num = np.concatenate([num, *(embedding_values(df[c], d) for c, d in self.embeddings.items())], axis=1)
        # Missing (NaN) is a value the model handles; an infinity is a broken upstream computation.
        bad = np.isinf(num)
        if bad.any():
            names = self.numeric + [c for c, d in self.embeddings.items() for _ in range(d)]
            col = names[int(np.nonzero(bad.any(axis=0))[0][0])]
            raise ValueError(f"feature {col!r} has {int(bad.sum())} infinite value(s)")
        cat = np.zeros((len(df), len(self.categorical)), np.int64)
        for j, c in enumerate(self.categorical):
            index = self._index[c]
            missing = index.get(MISSING, UNKNOWN)
            cat[:, j] = [missing if v is None else index.get(v, UNKNOWN) for v in category_text(df[c])]
        return torch.from_numpy(num), torch.from_numpy(cat)

    def forward(self, x_num: torch.Tensor, x_cat: torch.Tensor) -> torch.Tensor:
        z = (x_num - self.mean) / self.std
        gone = torch.isnan(x_num)
        z = torch.where(gone, torch.zeros_like(z), z)  # the training mean
        if self.indicated:
            z = torch.cat([z, gone[:, self.indicated].to(z.dtype)], dim=1)
        return self.shaped(self.net(z, x_cat), x_num.shape[0])

    @torch.no_grad()
    def predict_proba(self, df: pd.DataFrame, batch_size: int = 65536) -> np.ndarray:
        """The served output for each row of ``df`` as float64: P(label = 1) ``(n,)`` (binary), the
        class probabilities ``(n, K)`` (multiclass) or the predicted value ``(n,)`` (regression)."""
        was_training = self.training
        self.eval()
        try:
            x_num, x_cat = self.encode(df)
            device = self.mean.device
            out = [self.output(self(x_num[i:i + batch_size].to(device), x_cat[i:i + batch_size].to(device)).float())
                   for i in range(0, len(df), batch_size)]
            if not out:
                return self.empty_output()
            return torch.cat(out).cpu().numpy().astype(np.float64)
        finally:
            self.train(was_training)

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_index", None)  # rebuilt on load; keeps pickles small
        return state

    def __setstate__(self, state):
        state.setdefault("task", "binary")  # pickled before tasks (with this class's code): binary
        state.setdefault("_class_names", None)
        state.setdefault("embeddings", {})  # pickled before embedding features
        super().__setstate__(state)
        self._index = {k: {v: i + 1 for i, v in enumerate(vals)} for k, vals in self.vocab.items()}


def grow_vocabulary(model: nn.Module, df: pd.DataFrame, min_rows: int = MIN_NEW_CATEGORY_ROWS) -> dict[str, list[str]]:
    """Append to each categorical vocabulary of ``model`` (a :class:`TabularModel`) the values ``df``
    holds in at least ``min_rows`` rows that it lacks, and grow the network's embedding table of that
    feature to match: a warm start can then learn categories its champion never saw (new products,
    renamed values), where they would all share the unknown bucket. Each new row starts as a copy of
    the unknown bucket's, so the grown model scores every row exactly as before until it trains.
    Existing indices never move. Only a network whose ``embeddings`` is a ``ModuleList`` of
    ``nn.Embedding``, one per categorical feature in order (:class:`MLP`), is grown; another is left
    as it is (its new categories stay unknown). Returns the values added, per feature.

    A function of the model's attributes, not a method: a champion is unpickled with the code of its
    classes as it was logged (``trainer.pyfunc.pickled_by_value``), so a champion logged before this
    function existed grows all the same."""
    vocab, categorical = getattr(model, "vocab", None), getattr(model, "categorical", None)
    tables = getattr(getattr(model, "net", None), "embeddings", None)
    if not isinstance(vocab, dict) or not isinstance(categorical, list) or not isinstance(tables, nn.ModuleList):
        return {}
    if len(tables) != len(categorical) or any(not isinstance(t, nn.Embedding) or t.num_embeddings != len(vocab[c]) + 1
                                              for t, c in zip(tables, categorical)):
        return {}
    added: dict[str, list[str]] = {}
    for j, c in enumerate(categorical):
        if c not in df.columns:
            continue
        known = set(vocab[c])
        counts = pd.Series(category_text(df[c]), dtype=object).dropna().value_counts()
        new = sorted(str(v) for v, n in counts.items() if n >= min_rows and v not in known)
        if not new:
            continue
        old = cast(nn.Embedding, tables[j])
        grown = nn.Embedding(old.num_embeddings + len(new), old.embedding_dim).to(old.weight.device, old.weight.dtype)
        with torch.no_grad():
            grown.weight[:old.num_embeddings] = old.weight
            grown.weight[old.num_embeddings:] = old.weight[UNKNOWN]
        tables[j] = grown
        vocab[c] = list(vocab[c]) + new
        added[c] = new
    if added:
        object.__setattr__(model, "_index", {k: {v: i + 1 for i, v in enumerate(vals)} for k, vals in vocab.items()})
    return added
