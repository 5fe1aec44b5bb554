"""Building a model for the configured schema and task: preprocessing fitted on the training rows
around the default MLP or a user's network from ``model.factory`` ("package.module:function"),
with K outputs for a multiclass model (the factory gets ``n_outputs=K``) and one otherwise."""
from __future__ import annotations

import importlib
from typing import Any, Callable

import pandas as pd
import torch
from torch import nn

from monitor.config import DriftloopConfig
from monitor.errors import ConfigError
from trainer.model import MLP, TabularModel


def load_factory(spec: str) -> Callable[..., nn.Module]:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"model.factory must look like 'package.module:function', got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"model.factory {spec!r}: cannot import {module_name!r}: {exc}") from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ConfigError(f"model.factory {spec!r}: {module_name!r} has no callable {attr!r}")
    return factory


def build_model(cfg: DriftloopConfig, data: pd.DataFrame, seed: int | None = None) -> Any:
    """A fresh, untrained model whose scaling and vocabularies (and, for regression, the target's
    scaling) are fitted on ``data`` (rows checked by :func:`trainer.data.check_frame`).
    Weights are initialised from ``seed`` (default ``training.seed``), so builds are reproducible.
    With ``training.entrypoint``, the user's network (trainer/entrypoint.py) instead of a TabularModel."""
    if cfg.training.entrypoint:
        from trainer.entrypoint import build_entrypoint_model
        return build_entrypoint_model(cfg, data, seed)
    m = cfg.model
    task = m.kind
    outputs = task.n_outputs(m.classes)
    # Embedding features: dim standardised inputs each (trainer/model.py).
    embeddings = {name: m.embedding_dim(name) for name in m.embedding_features}
    vocab, mean, std = TabularModel.preprocessing_from(data, m.numeric_features, m.categorical_features, embeddings)
    cardinalities = [len(vocab[c]) + 1 for c in m.categorical_features]
    # A missing indicator for each numeric feature (each embedding) with gaps in the training rows.
    indicated = [c for c in [*m.numeric_features, *embeddings] if data[c].isna().any()]
    inputs = len(m.numeric_features) + sum(embeddings.values()) + len(indicated)
    torch.manual_seed(cfg.training.seed if seed is None else seed)
    if m.factory:
        factory = load_factory(m.factory)
        net: Any = factory(inputs, cardinalities, cfg.training, **task.factory_kwargs(outputs))
        if not isinstance(net, nn.Module):
            raise ConfigError(f"model.factory {m.factory!r} returned {type(net).__name__}, expected a torch.nn.Module")
    else:
        net = MLP(inputs, cardinalities, cfg.training.hidden, cfg.training.dropout, n_outputs=outputs)
    scaling = task.target_scaling(data[m.target].to_numpy())
    return TabularModel(net, m.numeric_features, m.categorical_features, vocab, mean, std, indicated,
                        task=m.task, classes=m.classes, target_scaling=scaling, embeddings=embeddings)
