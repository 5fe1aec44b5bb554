"""The model of a user's own training code (``training.entrypoint = "package.module:Object"``):
their network behind the interface driftloop's own model has (``task``, ``classes``,
``n_outputs``, ``output``, ``predict_proba(df)``), plus ``embeddings(df)`` when the object has
``embed``. The protocol and the loading live in :mod:`trainer.entrypoint`.

Like trainer/model.py this module imports only torch, numpy, pandas, trainer/model.py and
trainer/task_head.py (:class:`~trainer.task_head.TaskHead`): all are pickled *by value*
into the MLflow model. The user's object is not: a pickle holds the entrypoint spec and the
network's ``state_dict``, and loading imports the spec again and calls ``build_model(task,
n_outputs)`` (:func:`restore`), so the user's module must be importable where the model is loaded
(driftloop logs a local module with MLflow's ``code_paths``, which puts it on ``sys.path``).

The input of a row is its ``input_uri``, or its id where it has none (the id column named at
build time, else ``id``): the user's ``dataset(refs, train=False)`` turns those into tensors,
collated by the object's ``collate(items)`` where it has one (variable-length items: token ids
padded per batch, or concatenated with offsets), else torch's ``default_collate``, and the
network's raw output becomes the served one as
in :class:`trainer.model.TabularModel`: binary P(1) ``[N]``, multiclass probabilities ``[N, K]``,
regression the value in the target's units (the network learns the standardised target).
"""
from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, default_collate

from trainer.model import TaskHead  # pickled by value too (trainer/pyfunc.py)
from trainer.task_head import head_for

INPUT_URI = "input_uri"  # monitor.embeddings.INPUT_URI, repeated: serving must not import driftloop
SCORING_BATCH = 256      # rows per forward when scoring: images, not table rows


def import_user_module(module_name: str) -> Any:
    """Import the user's module; as uvicorn and gunicorn do, the working directory is searched too
    (the ``driftloop`` console script's own path does not hold the user's project folder), after
    the installed packages."""
    import os
    import sys
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        here = os.getcwd()
        top = exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + "."))
        if not top or here in sys.path:
            raise  # a module the user's code imports is missing: say that, don't retry
        sys.path.append(here)
        return importlib.import_module(module_name)


@dataclass(frozen=True)
class InputSpec:
    """One input tensor of the user's network, as ``forward`` takes it: ``dtype`` a torch dtype's
    name (``"float32"``, ``"int64"``, ``"bool"`` ...), ``shape`` one entry per axis, a string for an
    axis whose length varies (``"batch"``, ``"tokens"``: a dynamic axis of the ONNX graph), an int
    for a fixed one. Without declarations the network takes one float32 tensor, batch first."""
    name: str
    dtype: str = "float32"
    shape: tuple[int | str, ...] = ("batch",)

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    def dynamic_axes(self) -> dict[int, str]:
        return {i: axis for i, axis in enumerate(self.shape) if isinstance(axis, str)}


def declared_inputs(user: Any) -> list[InputSpec] | None:
    """The object's ``input_spec`` (an attribute or a method without arguments): a list of
    :class:`InputSpec` or of dicts with its fields; None where it declares none. ValueError
    (trainer.entrypoint turns it into a ConfigError) for a declaration that cannot be read."""
    found = getattr(user, "input_spec", None)
    if found is None:
        return None
    found = found() if callable(found) else found
    specs = []
    for item in found:
        spec = item if isinstance(item, InputSpec) else InputSpec(**item) if isinstance(item, dict) else None
        if spec is None:
            raise ValueError(f"input_spec: {item!r} is neither an InputSpec nor a dict of its fields")
        spec = InputSpec(str(spec.name), str(spec.dtype), tuple(spec.shape))
        if not isinstance(getattr(torch, spec.dtype, None), torch.dtype):
            raise ValueError(f"input_spec {spec.name!r}: {spec.dtype!r} is not a torch dtype")
        specs.append(spec)
    if not specs:
        raise ValueError("input_spec declares no input")
    return specs


def load_object(spec: str) -> Any:
    """The object a spec names: an instance of a class (made with no arguments) or the object itself.
    Raises ImportError / AttributeError; trainer.entrypoint turns them into a ConfigError."""
    module_name, _, attr = spec.partition(":")
    obj = getattr(import_user_module(module_name), attr)
    return obj() if isinstance(obj, type) else obj


class LabelledDataset(Dataset):
    """The user's dataset with driftloop's labels: item i is ``(x_i, y_i)``. ``targets`` holds every
    label, so the loop reads class weights without touching an input."""

    def __init__(self, inputs: Dataset, targets: torch.Tensor, collate_inputs: Callable[[list], Any] | None = None):
        self.inputs, self.targets, self.collate_inputs = inputs, targets, collate_inputs

    @property
    def collate(self) -> Callable[[list], Any] | None:
        """The batches' collate where the user's object has one (items ``(x, y)``: its ``collate`` of
        the x's, torch's of the y's); None for torch's ``default_collate``."""
        return None if self.collate_inputs is None else self._collate

    def _collate(self, items: list) -> tuple[Any, torch.Tensor]:
        assert self.collate_inputs is not None
        return self.collate_inputs([x for x, _ in items]), default_collate([y for _, y in items])

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, i: int) -> tuple[Any, torch.Tensor]:
        return self.inputs[i], self.targets[i]


class EntrypointModel(TaskHead, nn.Module):
    """A user's network with driftloop's model interface (see the module doc)."""

    def __init__(self, spec: str, net: nn.Module, user: Any, *, task: str, classes: Sequence[str] | None,
                 target_scaling: tuple[float, float] = (0.0, 1.0), embedding_feature: str | None = None,
                 id_column: str = "id"):
        super().__init__()
        self.spec, self.net, self.user, self.task = spec, net, user, str(task)  # a plain string when pickled
        self._class_names = None if classes is None else [str(c) for c in classes]
        self.embedding_feature = embedding_feature if hasattr(user, "embed") else None
        self.id_column = id_column
        self.input_specs = declared_inputs(user)
        self.register_target_scaling(target_scaling)

    @property
    def collate(self) -> Callable[[list], Any]:
        """The user's ``collate(items)``, else torch's ``default_collate``."""
        return getattr(self.user, "collate", None) or default_collate

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        raw = self.net(*inputs)
        return self.shaped(raw, raw.shape[0])

    # -- inputs ----------------------------------------------------------------------------------
    def refs(self, df: pd.DataFrame) -> list[str]:
        """Each row's ``input_uri``, or its id where it has none; ValueError naming the rows with neither."""
        n = len(df)
        uris = df[INPUT_URI].tolist() if INPUT_URI in df.columns else [None] * n
        id_col = self.id_column if self.id_column in df.columns else "id" if "id" in df.columns else None
        ids = df[id_col].tolist() if id_col is not None else [None] * n
        out, missing = [], []
        for i, (uri, rid) in enumerate(zip(uris, ids)):
            ref = uri if _present(uri) else rid if _present(rid) else None
            if ref is None:
                missing.append(i)
            out.append("" if ref is None else str(ref))
        if missing:
            shown = ", ".join(map(str, missing[:5])) + (" ..." if len(missing) > 5 else "")
            raise ValueError(f"{len(missing)} row(s) have neither {INPUT_URI!r} nor an id "
                             f"({self.id_column!r}) to find their input by (rows {shown})")
        return out

    def inputs(self, df: pd.DataFrame, train: bool = False) -> Dataset:
        """The user's dataset of ``df``'s rows."""
        return self.user.dataset(self.refs(df), train)

    def training_data(self, df: pd.DataFrame, target: str, train: bool) -> LabelledDataset:
        """``(x, y)`` items for the loop: y float32 0/1 (binary), int64 class indices (multiclass) or
        the standardised target (regression), as trainer.data.tensors gives a TabularModel."""
        return LabelledDataset(self.inputs(df, train), self.target_tensor(df[target].to_numpy()),
                               getattr(self.user, "collate", None))

    def batches(self, df: pd.DataFrame, batch_size: int = SCORING_BATCH):
        """``df``'s inputs (train=False) in collated batches, on the model's device."""
        device = next(self.parameters(), torch.empty(0)).device
        loader = DataLoader(self.inputs(df, False), batch_size=batch_size, collate_fn=self.collate)
        for batch in loader:
            parts = batch if isinstance(batch, (list, tuple)) else [batch]
            yield [t.to(device) for t in parts]

    # -- scoring ---------------------------------------------------------------------------------
    @torch.no_grad()
    def predict_proba(self, df: pd.DataFrame, batch_size: int = SCORING_BATCH) -> np.ndarray:
        """TabularModel.predict_proba's output: P(1) ``(n,)``, class probabilities ``(n, K)`` or values ``(n,)``."""
        with _evaluating(self):
            out = [self.output(self(*x).float()) for x in self.batches(df, batch_size)]
        if not out:
            return self.empty_output()
        return torch.cat(out).cpu().numpy().astype(np.float64)

    @torch.no_grad()
    def embeddings(self, df: pd.DataFrame, batch_size: int = SCORING_BATCH) -> np.ndarray:
        """float32 ``(n, dim)``: the user's ``embed(net, x)`` of each row. ValueError without ``embed``."""
        if not hasattr(self.user, "embed"):
            raise ValueError(f"training.entrypoint {self.spec!r} has no embed(model, x)")
        with _evaluating(self):
            out = [_rows(self.user.embed(self.net, *x).float()) for x in self.batches(df, batch_size)]
        return torch.cat(out).cpu().numpy() if out else np.zeros((0, 0), np.float32)

    def __reduce__(self):
        state = {k: v.detach().cpu() for k, v in self.state_dict().items()}
        return restore, (self.spec, self.task, self.classes, self.target_scaling(), self.embedding_feature,
                         self.id_column, state)


def restore(spec: str, task: str, classes: list[str] | None, scaling: tuple[float, float],
            embedding_feature: str | None, id_column: str, state: dict[str, torch.Tensor]) -> EntrypointModel:
    """Rebuild a pickled model: the user's network from the spec, then the saved weights."""
    user = load_object(spec)
    n_outputs = head_for(task).n_outputs(classes)
    model = EntrypointModel(spec, user.build_model(task, n_outputs), user, task=task, classes=classes,
                            target_scaling=scaling, embedding_feature=embedding_feature, id_column=id_column)
    model.load_state_dict(state)
    return model.eval()


def _rows(vectors: torch.Tensor) -> torch.Tensor:
    """``[N, dim]`` (N from the output: an input of token ids concatenated with offsets is not N long)."""
    return vectors.reshape(vectors.shape[0], -1)


def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and str(value) != ""


class _evaluating:
    """Eval mode for the block, the previous mode after."""

    def __init__(self, model: nn.Module):
        self.model, self.was = model, model.training

    def __enter__(self) -> None:
        self.model.eval()

    def __exit__(self, *exc: object) -> None:
        self.model.train(self.was)
