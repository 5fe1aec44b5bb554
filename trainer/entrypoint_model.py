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

The files a user's ``prepare_artifacts`` wrote (a tokenizer's vocabulary, a label map, backbone
weights) travel the same way: :class:`Artifacts` pickles them as bytes beside the weights, and
loading writes them to a private folder before ``build_model`` runs (it may size the network from
them). A method that names an ``artifacts`` parameter (``build_model``, ``dataset``, ``collate``)
gets that folder, or None where the object has no ``prepare_artifacts``.

The input of a row is its ``input_uri``, or its id where it has none (the id column named at
build time, else ``id``): the user's ``dataset(refs, train=False)`` turns those into tensors,
collated by the object's ``collate(items)`` where it has one (variable-length items: token ids
padded per batch, or concatenated with offsets), else torch's ``default_collate``, and the
network's raw output becomes the served one as
in :class:`trainer.model.TabularModel`: binary P(1) ``[N]``, multiclass probabilities ``[N, K]``,
regression the value in the target's units (the network learns the standardised target).
"""
from __future__ import annotations

import hashlib
import importlib
import inspect
import math
import os
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from functools import partial
from pathlib import Path
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
ARTIFACTS = "artifacts"  # the parameter by which a user's method takes the artifacts folder


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


class Artifacts:
    """The files of one model version's ``prepare_artifacts``, in a folder the model owns: made
    empty for ``prepare_artifacts`` to fill, or written from a pickle's bytes when a version loads,
    and removed when the model is (or the process ends). The user's code reads it and never writes
    it after ``prepare_artifacts``: a copy of the model (a warm start) gets a folder of its own.

    Pickled as ``{relative path: bytes}``, beside the weights in the MLflow model: a version loads
    with its artifacts wherever it is unpickled (a service, the retrain child, a deep copy),
    before ``build_model`` needs them. Nothing else is held in memory."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._remove = weakref.finalize(self, _remove_folder, str(folder), os.getpid())

    @classmethod
    def empty(cls) -> "Artifacts":
        return cls(Path(tempfile.mkdtemp(prefix="driftloop-artifacts-")))

    def files(self) -> dict[str, bytes]:
        """Every file under the folder by its path relative to it (``/``-separated)."""
        return {path.relative_to(self.folder).as_posix(): path.read_bytes()
                for path in sorted(self.folder.rglob("*")) if path.is_file()}

    def manifest(self) -> list[dict[str, Any]]:
        """``[{"path", "bytes", "sha256"}]``: what a version carries, for people reading its metadata."""
        return [{"path": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                for name, data in self.files().items()]

    def __reduce__(self) -> tuple[Any, ...]:
        return _artifacts_from, (self.files(),)


def _remove_folder(folder: str, owner: int) -> None:
    if os.getpid() == owner:  # a forked child (a DataLoader worker) leaves its parent's folder alone
        shutil.rmtree(folder, ignore_errors=True)


def _artifacts_from(files: dict[str, bytes]) -> Artifacts:
    """An unpickled :class:`Artifacts`: the files written to a folder of its own."""
    artifacts = Artifacts.empty()
    root = artifacts.folder.resolve()
    for name, data in files.items():
        path = root / name
        if root not in path.resolve().parents:  # a pickle is data: no path out of the folder
            raise ValueError(f"artifact {name!r} lies outside its folder")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return artifacts


def takes_artifacts(method: Callable[..., Any]) -> bool:
    """Does the user's ``method`` name an ``artifacts`` parameter? Those that do get the folder;
    the others are called as before artifacts existed (``**kwargs`` alone is not asking for it)."""
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):  # a builtin or C callable: no signature to read
        return False
    return ARTIFACTS in params and params[ARTIFACTS].kind is not inspect.Parameter.POSITIONAL_ONLY


def with_artifacts(method: Callable[..., Any], folder: Path | None) -> Callable[..., Any]:
    """``method`` with ``artifacts=folder`` bound where it takes it (:func:`takes_artifacts`)."""
    return partial(method, **{ARTIFACTS: folder}) if takes_artifacts(method) else method


def build_net(user: Any, task: str, n_outputs: int, artifacts: Artifacts | None) -> Any:
    """The user's ``build_model(task, n_outputs)``, given ``artifacts=`` where it takes it."""
    return with_artifacts(user.build_model, None if artifacts is None else artifacts.folder)(task, n_outputs)


def refs_of(df: pd.DataFrame, id_column: str) -> list[str]:
    """Each row's ``input_uri``, or its id where it has none (``id_column``, else ``id``);
    ValueError naming the rows with neither."""
    n = len(df)
    uris = df[INPUT_URI].tolist() if INPUT_URI in df.columns else [None] * n
    id_col = id_column if id_column in df.columns else "id" if "id" in df.columns else None
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
                         f"({id_column!r}) to find their input by (rows {shown})")
    return out


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
                 id_column: str = "id", artifacts: Artifacts | None = None):
        super().__init__()
        self.spec, self.net, self.user, self.task = spec, net, user, str(task)  # a plain string when pickled
        self._class_names = None if classes is None else [str(c) for c in classes]
        self.embedding_feature = embedding_feature if hasattr(user, "embed") else None
        self.id_column = id_column
        self.input_specs = declared_inputs(user)
        self.artifacts = artifacts  # the files of the user's prepare_artifacts, if it has one
        self.register_target_scaling(target_scaling)

    @property
    def artifacts_folder(self) -> Path | None:
        return None if self.artifacts is None else self.artifacts.folder

    @property
    def user_collate(self) -> Callable[[list], Any] | None:
        """The user's ``collate(items)`` (given ``artifacts=`` where it takes it); None without one."""
        found = getattr(self.user, "collate", None)
        return None if found is None else with_artifacts(found, self.artifacts_folder)

    @property
    def collate(self) -> Callable[[list], Any]:
        """The user's ``collate(items)``, else torch's ``default_collate``."""
        return self.user_collate or default_collate

    def param_groups(self, lr: float) -> list[dict[str, Any]]:
        """The optimizer's parameter groups (trainer/loop.py builds AdamW from them): the user's
        ``param_groups(net, lr)`` where it has one, else one group. Frozen parameters
        (``requires_grad`` False) are left out, and trainable ones that no group names form a last
        group at ``lr``. ValueError for a group without ``params`` or naming a tensor that is not
        one of the network's parameters."""
        trainable = [p for p in self.parameters() if p.requires_grad]
        hook = getattr(self.user, "param_groups", None)
        if hook is None:
            return [{"params": trainable}]
        ours, named, groups = {id(p) for p in self.parameters()}, set(), []
        for i, group in enumerate(hook(self.net, lr)):
            if not isinstance(group, dict) or "params" not in group:
                raise ValueError(f"param_groups: group {i} is not a dict with 'params'")
            params = [group["params"]] if isinstance(group["params"], torch.Tensor) else list(group["params"])
            if any(id(p) not in ours for p in params):
                raise ValueError(f"param_groups: group {i} names a tensor that is not a parameter of the network")
            named |= {id(p) for p in params}
            kept = [p for p in params if p.requires_grad]
            if kept:
                groups.append({**group, "params": kept})
        rest = [p for p in trainable if id(p) not in named]
        return groups + ([{"params": rest}] if rest else [])

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        raw = self.net(*inputs)
        return self.shaped(raw, raw.shape[0])

    # -- inputs ----------------------------------------------------------------------------------
    def refs(self, df: pd.DataFrame) -> list[str]:
        """Each row's ``input_uri``, or its id where it has none; ValueError naming the rows with neither."""
        return refs_of(df, self.id_column)

    def inputs(self, df: pd.DataFrame, train: bool = False) -> Dataset:
        """The user's dataset of ``df``'s rows (given ``artifacts=`` where it takes it)."""
        return with_artifacts(self.user.dataset, self.artifacts_folder)(self.refs(df), train)

    def training_data(self, df: pd.DataFrame, target: str, train: bool) -> LabelledDataset:
        """``(x, y)`` items for the loop: y float32 0/1 (binary), int64 class indices (multiclass) or
        the standardised target (regression), as trainer.data.tensors gives a TabularModel."""
        return LabelledDataset(self.inputs(df, train), self.target_tensor(df[target].to_numpy()),
                               self.user_collate)

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
                         self.id_column, state, self.artifacts)


def restore(spec: str, task: str, classes: list[str] | None, scaling: tuple[float, float],
            embedding_feature: str | None, id_column: str, state: dict[str, torch.Tensor],
            artifacts: Artifacts | None = None) -> EntrypointModel:
    """Rebuild a pickled model: its artifacts (already written to their folder when unpickled),
    the user's network from the spec, then the saved weights. A model pickled before artifacts
    existed carries its own copy of this module's code and never gets here without them."""
    user = load_object(spec)
    n_outputs = head_for(task).n_outputs(classes)
    model = EntrypointModel(spec, build_net(user, task, n_outputs, artifacts), user, task=task, classes=classes,
                            target_scaling=scaling, embedding_feature=embedding_feature, id_column=id_column,
                            artifacts=artifacts)
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
