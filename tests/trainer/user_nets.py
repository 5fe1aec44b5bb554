"""A user's own network, named in ``model.factory = "tests.trainer.user_nets:build"``."""
from __future__ import annotations

import torch
from torch import nn


class WideLinear(nn.Module):
    """Logistic regression on numerics plus a learned bias per category."""

    def __init__(self, n_numeric: int, cardinalities: list[int]):
        super().__init__()
        self.linear = nn.Linear(n_numeric, 1)
        self.biases = nn.ModuleList(nn.Embedding(c, 1) for c in cardinalities)

    def forward(self, x_num: torch.Tensor, x_cat: torch.Tensor) -> torch.Tensor:
        out = self.linear(x_num).squeeze(-1)
        for i, emb in enumerate(self.biases):
            out = out + emb(x_cat[:, i]).squeeze(-1)
        return out


def build(n_numeric: int, cardinalities: list[int], training_cfg) -> nn.Module:
    return WideLinear(n_numeric, cardinalities)


def not_a_module(n_numeric, cardinalities, training_cfg):
    return "oops"
