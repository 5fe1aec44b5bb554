"""A pretrained backbone as a user's ``training.entrypoint`` would ship it, in miniature (the
guide's torchvision ResNet, section 11): the backbone's weights are a file the user's package
ships (:data:`shipped`, set by the test), copied into the version's artifacts by
``prepare_artifacts`` and loaded from there by ``build_model``, so nothing is downloaded and a
version loads where the file is not installed. The backbone is frozen (``requires_grad`` False,
its BatchNorm kept in eval mode) and the head trains at ``HEAD_LR_FACTOR`` times the learning
rate through ``param_groups``. Images: tests/trainer/entry_digits.py's ``.npy`` digits."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn
from torch.utils.data import Dataset

from tests.trainer.entry_digits import Images

WEIGHTS = "backbone.pt"
FEATURES = 16
HEAD_LR_FACTOR = 10.0
shipped: Path | None = None  # where "the package" keeps the pretrained weights (set by the test)


class Backbone(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                                    nn.AdaptiveAvgPool2d(2), nn.Flatten())  # 4 x 2 x 2 = 16 features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def pretrained_weights(path: Path) -> dict[str, torch.Tensor]:
    """Stand-in for a pretrained checkpoint: a backbone with non-default BatchNorm statistics."""
    torch.manual_seed(123)
    backbone = Backbone()
    bn = backbone.layers[1]
    assert isinstance(bn, nn.BatchNorm2d)
    bn.running_mean.fill_(0.5)  # type: ignore[union-attr]
    bn.running_var.fill_(2.0)  # type: ignore[union-attr]
    torch.save(backbone.state_dict(), path)
    return {k: v.clone() for k, v in backbone.state_dict().items()}


class Classifier(nn.Module):
    def __init__(self, n_outputs: int, weights: Path):
        super().__init__()
        self.backbone = Backbone()
        self.backbone.load_state_dict(torch.load(weights, weights_only=True))
        self.backbone.requires_grad_(False)  # frozen: param_groups leaves it out of the optimizer
        self.head = nn.Linear(FEATURES, n_outputs)

    def train(self, mode: bool = True) -> "Classifier":
        super().train(mode)
        self.backbone.eval()  # frozen BatchNorm: its running statistics stay the pretrained ones
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


class Pretrained:
    embedding_feature = "cnn"

    def prepare_artifacts(self, refs: Sequence[str], previous: Path | None, out: Path) -> None:
        source = previous / WEIGHTS if previous is not None else shipped
        assert source is not None, "set entry_backbone.shipped"
        shutil.copy(source, out / WEIGHTS)

    def build_model(self, task: str, n_outputs: int, artifacts: Path) -> nn.Module:
        return Classifier(n_outputs, artifacts / WEIGHTS)

    def dataset(self, refs: Sequence[str], train: bool) -> Dataset:
        return Images(refs, train)

    def param_groups(self, model: nn.Module, lr: float) -> list[dict[str, Any]]:
        return [{"params": model.head.parameters(), "lr": lr * HEAD_LR_FACTOR}]  # type: ignore[union-attr]

    def embed(self, model: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return model.backbone(x)  # type: ignore[operator]


class HeadTwice(Pretrained):
    """Names the head in two groups: the optimizer refuses it."""

    def param_groups(self, model: nn.Module, lr: float) -> list[dict[str, Any]]:
        return [{"params": list(model.head.parameters())}, {"params": [model.head.weight], "lr": lr}]  # type: ignore


class ForeignTensor(Pretrained):
    """Names a parameter of another network."""

    def param_groups(self, model: nn.Module, lr: float) -> list[dict[str, Any]]:
        return [{"params": nn.Linear(2, 2).parameters()}]


class SlowBackbone(Pretrained):
    """Fine-tunes the backbone at a tenth of the learning rate; names only the backbone's group."""

    def build_model(self, task: str, n_outputs: int, artifacts: Path) -> nn.Module:
        return super().build_model(task, n_outputs, artifacts).requires_grad_(True)

    def param_groups(self, model: nn.Module, lr: float) -> list[dict[str, Any]]:
        return [{"params": model.backbone.parameters(), "lr": lr / 10}]  # type: ignore[union-attr]
