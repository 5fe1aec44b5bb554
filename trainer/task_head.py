"""The task's side of a served model (:class:`TaskHead`): what its raw output means and what is
served (see the table in trainer/model.py's docstring).

What differs per task is one small :class:`Head` per task (:class:`BinaryHead`,
:class:`MulticlassHead`, :class:`RegressionHead`), found by the task's name (:func:`head_for`).
A model stores only that name, a plain string: a model pickled before heads (or before tasks,
binary) loads and serves as it always did. The training side of a task (its loss, class weights,
target checks) is monitor/tasks/task.py's; this is the side that travels with the model.

Like trainer/model.py, which re-exports :class:`TaskHead`, this module imports only torch, numpy
and pandas: it is pickled *by value* with the model (trainer/pyfunc.py), so serving needs no
driftloop.
"""
from __future__ import annotations

from typing import Any, ClassVar, Sequence, cast

import numpy as np
import pandas as pd
import torch
from torch import nn


def output_proba_column(name: str) -> str:
    """``proba_<class>``: monitor.tasks.proba_column's rule, kept here because the pickled pyfunc
    must not import driftloop (tests/trainer/test_tasks_model.py holds the two together)."""
    return f"proba_{name}"


class Head:
    """One task's side of a served model. Stateless (one per task): what it needs of a model, the
    classes or the target's scaling, it is handed."""

    name: ClassVar[str]
    #: The dtype of the targets the network learns from.
    target_dtype: ClassVar[torch.dtype] = torch.float32

    def check_classes(self, classes: Sequence[str] | None) -> None:
        """ValueError when a model of this task cannot have these classes."""

    def n_outputs(self, classes: Sequence[str] | None) -> int:
        """Width of the raw output: one number."""
        return 1

    def register_target_scaling(self, module: nn.Module, target_scaling: tuple[float, float]) -> None:
        """Buffers of the target's scaling on ``module``: none (a state dict stays what it always was)."""

    def target_scaling(self, model: Any) -> tuple[float, float]:
        """``(mean, std)`` of the target the network learns: the target itself."""
        return 0.0, 1.0

    def scaled_target(self, model: Any, y: np.ndarray) -> np.ndarray:
        """A target on the scale the network learns: as it is."""
        return np.asarray(y)

    def shaped(self, raw: torch.Tensor, rows: int, n_outputs: int) -> torch.Tensor:
        """The network's raw output in the model's shape: ``[B]``."""
        return raw.reshape(-1)

    def output(self, model: Any, raw: torch.Tensor) -> torch.Tensor:
        """The served output of a raw one: P(class 1), the sigmoid of a logit."""
        return torch.sigmoid(raw)

    def empty_output(self, n_outputs: int) -> np.ndarray:
        """``predict_proba`` of no rows."""
        return np.zeros(0)

    def served(self, out: np.ndarray, index: pd.Index, classes: Sequence[str] | None, prediction: str,
               score: str, embedded: bool) -> np.ndarray | pd.DataFrame:
        """The pyfunc's result of ``predict_proba``'s ``out`` (trainer/pyfunc.py): P(1) as a numpy
        array, as always; a frame with P(1) in the ``score`` column when an embedding joins it."""
        return pd.DataFrame({score: out}, index=index) if embedded else out


class BinaryHead(Head):
    """One logit; P(class 1) served."""

    name = "binary"


class MulticlassHead(Head):
    """One logit per class; the class probabilities served, and the most probable class's name."""

    name = "multiclass"
    target_dtype = torch.int64

    def check_classes(self, classes: Sequence[str] | None) -> None:
        if classes is None or len(classes) < 2:
            raise ValueError("a multiclass model needs its classes (two or more)")

    def n_outputs(self, classes: Sequence[str] | None) -> int:
        """K logits."""
        return len(classes or ())

    def shaped(self, raw: torch.Tensor, rows: int, n_outputs: int) -> torch.Tensor:
        """``[B, K]``."""
        return raw.reshape(rows, n_outputs)

    def output(self, model: Any, raw: torch.Tensor) -> torch.Tensor:
        """The class probabilities (softmax)."""
        return torch.softmax(raw, dim=-1)

    def empty_output(self, n_outputs: int) -> np.ndarray:
        return np.zeros((0, n_outputs))

    def served(self, out: np.ndarray, index: pd.Index, classes: Sequence[str] | None, prediction: str,
               score: str, embedded: bool) -> np.ndarray | pd.DataFrame:
        """The served class's name in the ``prediction`` column and one ``proba_<class>`` column per class."""
        names = list(classes or ())
        picked = [names[i] for i in np.argmax(out, axis=1)] if len(out) else []
        probabilities = pd.DataFrame(out, columns=[output_proba_column(c) for c in names], index=index)
        return pd.concat([pd.DataFrame({prediction: picked}, index=index, dtype=object), probabilities], axis=1)


class RegressionHead(Head):
    """The standardised value; the value in the target's units served."""

    name = "regression"

    def register_target_scaling(self, module: nn.Module, target_scaling: tuple[float, float]) -> None:
        """``target_mean`` and ``target_std``: the network learns the standardised target."""
        module.register_buffer("target_mean", torch.tensor(float(target_scaling[0]), dtype=torch.float32))
        module.register_buffer("target_std", torch.tensor(float(target_scaling[1]), dtype=torch.float32))

    def target_scaling(self, model: Any) -> tuple[float, float]:
        return float(model.target_mean), float(model.target_std)

    def scaled_target(self, model: Any, y: np.ndarray) -> np.ndarray:
        return (np.asarray(y, dtype=np.float64) - float(model.target_mean)) / float(model.target_std)

    def output(self, model: Any, raw: torch.Tensor) -> torch.Tensor:
        """The value in the target's units."""
        return raw * model.target_std + model.target_mean

    def served(self, out: np.ndarray, index: pd.Index, classes: Sequence[str] | None, prediction: str,
               score: str, embedded: bool) -> np.ndarray | pd.DataFrame:
        """The value in the ``prediction`` column."""
        return pd.DataFrame({prediction: out}, index=index)


_HEADS: dict[str, Head] = {head.name: head for head in (BinaryHead(), MulticlassHead(), RegressionHead())}


def head_for(task: str) -> Head:
    """The head of a task's name; ValueError naming the three for anything else."""
    try:
        return _HEADS[str(task)]
    except KeyError:
        raise ValueError(f"task must be binary, multiclass or regression, got {task!r}") from None


class TaskHead:
    """The task's side of a model, shared by :class:`TabularModel` and a ``training.entrypoint``
    model (trainer/entrypoint_model.py): class names, the raw output's width and shape, the
    regression target's scaling and the served output of a raw one, each asked of the task's
    :class:`Head`. A mixin of an ``nn.Module`` that sets ``task`` (the name, a plain string) and
    ``_class_names`` and calls :meth:`register_target_scaling`."""

    task: str
    _class_names: list[str] | None
    target_mean: torch.Tensor  # regression only: the target's scaling
    target_std: torch.Tensor

    @property
    def task_head(self) -> Head:
        """The head of the model's task (looked up, not stored: the model pickles only the name)."""
        return head_for(self.task)

    def register_target_scaling(self, target_scaling: tuple[float, float]) -> None:
        """Buffers for the target's scaling where the task has one (regression)."""
        self.task_head.register_target_scaling(cast(nn.Module, self), target_scaling)

    def target_scaling(self) -> tuple[float, float]:
        """``(mean, std)`` of the target the network learns ((0, 1) unless regression)."""
        return self.task_head.target_scaling(self)

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
        return self.task_head.n_outputs(self._class_names)

    def scaled_target(self, y: np.ndarray) -> np.ndarray:
        """A regression target on the scale the network learns (identity for classifiers)."""
        return self.task_head.scaled_target(self, y)

    def target_tensor(self, y: np.ndarray) -> torch.Tensor:
        """The targets as the network learns them: float32 0/1, int64 class indices or the
        standardised value as float32."""
        return torch.as_tensor(self.scaled_target(y), dtype=self.task_head.target_dtype)

    def shaped(self, raw: torch.Tensor, rows: int) -> torch.Tensor:
        """The network's raw output of ``rows`` rows as ``[B]`` or, multiclass, ``[B, K]``."""
        return self.task_head.shaped(raw, rows, self.n_outputs)

    def output(self, raw: torch.Tensor) -> torch.Tensor:
        """The served output of a raw output (see the module doc's table)."""
        return self.task_head.output(self, raw)

    def empty_output(self) -> np.ndarray:
        """``predict_proba`` of no rows: ``(0,)`` or, multiclass, ``(0, K)``."""
        return self.task_head.empty_output(self.n_outputs)
