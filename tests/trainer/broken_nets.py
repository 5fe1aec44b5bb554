"""Networks whose ONNX export is deliberately broken, for the export checks (model.factory targets)."""
from __future__ import annotations

import torch
from torch import nn


class BatchBranch(nn.Module):
    """Flips its output for batches of 8 rows or fewer. Python control flow is not in a trace: the
    exporter records only the branch its sample took, so the graph disagrees with PyTorch on larger
    batches, which the parity check on the reference rows must catch."""

    def __init__(self, n_numeric: int, cardinalities: list[int]):
        super().__init__()
        self.linear = nn.Linear(n_numeric, 1)

    def forward(self, x_num: torch.Tensor, x_cat: torch.Tensor) -> torch.Tensor:
        out = self.linear(x_num).squeeze(-1)
        return -out if x_num.shape[0] <= 8 else out


class Untraceable(nn.Module):
    """Uses an operator the ONNX exporter has no translation for."""

    def __init__(self, n_numeric: int, cardinalities: list[int]):
        super().__init__()
        self.linear = nn.Linear(n_numeric, 1)

    def forward(self, x_num: torch.Tensor, x_cat: torch.Tensor) -> torch.Tensor:
        return torch.special.i0(self.linear(x_num).squeeze(-1))


def branchy(n_numeric: int, cardinalities: list[int], training_cfg) -> nn.Module:
    return BatchBranch(n_numeric, cardinalities)


def untraceable(n_numeric: int, cardinalities: list[int], training_cfg) -> nn.Module:
    return Untraceable(n_numeric, cardinalities)
