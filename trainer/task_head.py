"""The task's side of a model (:class:`TaskHead`): what its raw output means and what is served
(see the table in trainer/model.py's docstring).

Like trainer/model.py, which re-exports it, this module imports only torch and numpy: it
is pickled *by value* with the model (trainer/pyfunc.py), so serving needs no driftloop.
"""
from __future__ import annotations

from typing import cast

import numpy as np
import torch
from torch import nn


class TaskHead:
    """The task's side of a model, shared by :class:`TabularModel` and a ``training.entrypoint``
    model (trainer/entrypoint_model.py): class names, the raw output's width, the regression
    target's scaling and the served output of a raw one. A mixin of an ``nn.Module`` that sets
    ``task`` and ``_class_names`` and, for regression, the ``target_mean``/``target_std`` buffers
    (:meth:`register_target_scaling`)."""

    task: str
    _class_names: list[str] | None
    target_mean: torch.Tensor  # regression only: the target's scaling
    target_std: torch.Tensor

    def register_target_scaling(self, target_scaling: tuple[float, float]) -> None:
        """Regression only (a classifier's state dict stays what it always was)."""
        if self.task == "regression":
            module = cast(nn.Module, self)
            module.register_buffer("target_mean", torch.tensor(float(target_scaling[0]), dtype=torch.float32))
            module.register_buffer("target_std", torch.tensor(float(target_scaling[1]), dtype=torch.float32))

    @property
    def classes(self) -> list[str] | None:
        """The class names in output order (multiclass), [negative, positive] (binary with named
        classes) or None. Stored under another name: cloudpickle, pickling this module by value,
        takes a function that uses ``torch`` and an attribute ``classes`` to need ``torch.classes``,
        which cannot be pickled."""
        return self._class_names

    @property
    def n_outputs(self) -> int:
        """Width of the raw output: K logits for multiclass, one number otherwise."""
        return len(self.classes or ()) if self.task == "multiclass" else 1

    def scaled_target(self, y: np.ndarray) -> np.ndarray:
        """A regression target on the scale the network learns (identity for classifiers)."""
        if self.task != "regression":
            return np.asarray(y)
        return (np.asarray(y, dtype=np.float64) - float(self.target_mean)) / float(self.target_std)

    def output(self, raw: torch.Tensor) -> torch.Tensor:
        """The served output of a raw output (see the module doc's table)."""
        if self.task == "multiclass":
            return torch.softmax(raw, dim=-1)
        if self.task == "regression":
            return raw * self.target_std + self.target_mean
        return torch.sigmoid(raw)
