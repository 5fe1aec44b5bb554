"""What the loop minimises and how it scores a model: each task's training loss
(:func:`task_loss`, with multiclass class weights) and the early-stopping loss with the task's
figures (:func:`evaluate`).
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from monitor.tasks import MULTICLASS, REGRESSION, Task, task_of
from trainer.batches import eval_batches, targets_of

# The multiclass class weights' clip and the regression loss's Huber delta, with why, are the
# tasks' (monitor/tasks/task.py); kept here under their old names.
CLASS_WEIGHT_RANGE = MULTICLASS.class_weight_range
HUBER_DELTA = REGRESSION.huber_delta


def model_task(model: nn.Module) -> Task:
    """The model's task; a network without one (a model pickled before tasks) is binary."""
    return task_of(getattr(model, "task", "binary"))


def class_weights(y: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Per-class weights of the multiclass loss from the training targets (see CLASS_WEIGHT_RANGE)."""
    return MULTICLASS.class_weights(y, n_classes)


def task_loss(task: str, raw: torch.Tensor, y: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
    """The training loss of a raw output (fp32, mean over the rows): BCE with logits (binary),
    cross-entropy with class weights (multiclass), Huber on the standardised target (regression)."""
    return task_of(task).loss(raw, y, weight)


def n_outputs(model: nn.Module, y: torch.Tensor) -> int:
    n = getattr(model, "n_outputs", None)
    return int(n) if n else int(y.max().item()) + 1


@torch.no_grad()
def evaluate(model: nn.Module, data: Any, device: torch.device,
             amp_dtype: torch.dtype | None = None, batch_size: int | None = None,
             num_workers: int = 0) -> dict[str, float]:
    """The early-stopping loss of ``model`` on ``data`` (``(inputs..., y)`` tensors, e.g.
    ``(x_num, x_cat, y)``, or a Dataset of ``(x, y)``) and the task's figures:
    binary log loss, accuracy, ROC AUC; multiclass cross-entropy (unweighted: the log loss of the
    probabilities served), accuracy, macro ROC AUC; regression the MSE on the standardised target,
    MAE and RMSE in the target's units."""
    was_training = model.training
    model.eval()
    task = model_task(model)
    logits, ys = [], []
    for *inputs, y_b in eval_batches(data, batch_size, num_workers):
        with torch.autocast(device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            logits.append(model(*(t.to(device) for t in inputs)).float())
        ys.append(y_b)
    model.train(was_training)
    y = torch.cat(ys) if ys else targets_of(data)
    logits_t = torch.cat(logits) if logits else torch.zeros(0, device=device)
    return task.evaluation(logits_t, y, model)
