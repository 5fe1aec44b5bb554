"""``training.entrypoint = "package.module:Object"``: the user's own PyTorch model and data code, run
by driftloop's trainer with everything driftloop's own model gets (AMP, gradient accumulation,
checkpoints and bit-identical resume, early stopping, DDP, MLflow, the gate, the registry, export).

The protocol. ``Object`` is a class (made with no arguments) or an object; driftloop calls:

- ``build_model(task, n_outputs) -> torch.nn.Module`` (required). ``forward(*x)`` takes one batch of
  what the dataset yields, collated by ``collate`` (default torch's ``default_collate``; a tuple
  is passed as several arguments), and returns raw outputs:
  ``[N, n_outputs]`` logits (multiclass), ``[N]`` or ``[N, 1]`` (binary logit, regression value
  on the standardised target).
- ``dataset(refs, train) -> torch.utils.data.Dataset`` (required). Item i is the input of
  ``refs[i]``, the row's ``input_uri`` (its id where it has none). driftloop pairs items with
  labels itself. ``train=True`` for training rows (augmentation allowed, drawn from torch's RNG so
  a resumed run is bit-identical), False for evaluation and scoring (items must not vary).
- ``embed(model, x) -> Tensor[N, dim]`` (optional): the embedding a service sends for the model's
  embedding feature; the reference sample's embeddings are recomputed with each new version, and
  the pyfunc outputs it as a list column named after the feature.
- ``embedding_feature`` (optional attribute): which embedding feature ``embed`` fills (default:
  the model's only one).
- ``collate(items) -> Tensor | tuple[Tensor, ...]`` (optional): a batch of dataset items, for
  items of different lengths (token ids padded per batch with a mask, or concatenated with offsets).
- ``input_spec`` (optional attribute, or a method returning it): the tensors ``forward`` takes,
  :class:`~trainer.entrypoint_model.InputSpec` objects or dicts of their fields (name, dtype, shape with
  a string per dynamic axis); the ONNX export feeds them. Without it: one float32 tensor.
- ``prepare_artifacts(refs, previous, out)`` (optional): writes the files a version carries (a
  tokenizer's vocabulary, a label map, backbone weights) into the folder ``out``, from the training
  rows' ``refs`` and ``previous``, the champion's artifacts folder in a retrain (a copy: a vocabulary
  grows from it) or None for a first train. Called when a model is built for training (a first
  train, a retrain's warm and cold starts), on every torchrun rank and again on a resume, so it must
  be deterministic. The files travel inside the MLflow model
  (:class:`~trainer.entrypoint_model.Artifacts`); wherever a version loads, ``build_model``,
  ``dataset`` and ``collate`` get their folder as ``artifacts=`` when they name that parameter
  (None without ``prepare_artifacts``). A retrain's warm start builds the network on the new
  artifacts and loads the champion's weights into it: a tensor that grew (words appended to a
  vocabulary) keeps the champion's values in its leading block (:func:`load_grown`).
- ``param_groups(model, lr) -> list[dict]`` (optional): the optimizer's parameter groups for the
  network, as ``torch.optim`` takes them (``params`` plus e.g. ``lr``, ``weight_decay``): a head's
  own learning rate. Frozen parameters (``requires_grad`` False) are left out; trainable ones no
  group names train at ``lr``
  (:meth:`~trainer.entrypoint_model.EntrypointModel.param_groups`).

When training starts :func:`check_model` runs the network on a couple of rows against the config.

This module loads and checks the object (every problem is a ConfigError naming the spec), builds
:class:`~trainer.entrypoint_model.EntrypointModel` for a config, and prepares frames (refs from the
id column, embedding columns the model computes). Code pickled into the MLflow model lives in
trainer/entrypoint_model.py.
"""
from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import site
import sys
import sysconfig
import tempfile
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from monitor.config import DriftloopConfig, ModelConfig
from monitor.embeddings import INPUT_URI
from monitor.errors import ConfigError, DataError, DriftloopError
from trainer.entrypoint_model import (Artifacts, EntrypointModel, InputSpec, build_net, declared_inputs,
                                      import_user_module, load_object, refs_of)
from trainer.task_head import head_for

log = logging.getLogger(__name__)

class EntrypointError(ConfigError):
    """The user's code (``training.entrypoint``) raised, or called ``sys.exit``, while driftloop ran it
    (training, reading rows): one ``Error:`` line naming the spec, the method and the exception, whose
    traceback is the error's ``__cause__`` and in the log at debug."""


def said(exc: BaseException) -> str:
    """An exception of the user's code as an error line says it: ``sys.exit(3)`` for a SystemExit."""
    return f"sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else f"{type(exc).__name__}: {exc}"


def _raised_in(spec: str, exc: BaseException) -> str:
    """`` in forward (epmod.py line 27)``: the deepest frame of the user's module in ``exc``'s
    traceback; ``""`` where none is (the module is not loaded, or the error came from elsewhere)."""
    module = sys.modules.get(spec.partition(":")[0])
    path = getattr(module, "__file__", None)
    if not path:
        return ""
    path = os.path.realpath(path)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if os.path.realpath(f.filename) == path]
    return f" in {frames[-1].name} ({os.path.basename(path)} line {frames[-1].lineno})" if frames else ""


def user_failure(spec: str, doing: str, exc: BaseException) -> EntrypointError:
    """The :class:`EntrypointError` of ``exc`` raised by the user's code while driftloop was ``doing``
    (``"training"``, ``"reading the training data"``); raise it ``from exc``."""
    log.debug("training.entrypoint %r failed while %s", spec, doing, exc_info=exc)
    verb = "called" if isinstance(exc, SystemExit) else "raised"
    return EntrypointError(f"training.entrypoint {spec!r}: the code{_raised_in(spec, exc)} {verb} {said(exc)} "
                           f"while {doing}")


@contextmanager
def running_user_code(spec: str | None, doing: str) -> Iterator[None]:
    """Any exception of the block, or a ``sys.exit`` in it, as :func:`user_failure` (``spec`` None:
    driftloop's own model, nothing translated). driftloop's own errors pass as they are, and so does
    KeyboardInterrupt (Ctrl-C still interrupts)."""
    if spec is None:
        yield
        return
    try:
        yield
    except DriftloopError:
        raise
    except (Exception, SystemExit) as exc:
        raise user_failure(spec, doing, exc) from exc


REQUIRED = ("build_model", "dataset")
HOOKS = ("embed", "collate", "prepare_artifacts", "param_groups")  # optional; callable where present
CHECK_ROWS = 2  # training rows read and run through the network when training starts (check_model)


def load_entrypoint(spec: str) -> Any:
    """The user's object, checked for the required methods; ConfigError naming ``spec`` otherwise."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"training.entrypoint must look like 'package.module:Object', got {spec!r}")
    try:
        import_user_module(module_name)
    except (Exception, SystemExit) as exc:  # an ImportError, or whatever the module raises while importing
        raise EntrypointError(f"training.entrypoint {spec!r}: cannot import {module_name!r}: {said(exc)}") from exc
    if not hasattr(sys.modules[module_name], attr):
        raise ConfigError(f"training.entrypoint {spec!r}: module {module_name!r} has no attribute {attr!r}")
    try:
        obj = load_object(spec)
    except (Exception, SystemExit) as exc:
        raise EntrypointError(f"training.entrypoint {spec!r}: {attr}() failed: {said(exc)}") from exc
    absent = [name for name in REQUIRED if not callable(getattr(obj, name, None))]
    if absent:
        raise ConfigError(f"training.entrypoint {spec!r}: {attr} lacks the required method(s) "
                          f"{', '.join(absent)} (see docs/parts/trainer.md, 'Your own training code')")
    uncallable = [name for name in HOOKS if getattr(obj, name, None) is not None and not callable(getattr(obj, name))]
    if uncallable:
        raise ConfigError(f"training.entrypoint {spec!r}: {attr}.{', '.join(uncallable)} must be a method")
    try:
        declared_inputs(obj)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"training.entrypoint {spec!r}: {exc}") from exc
    return obj


def embedding_feature(cfg: DriftloopConfig, user: Any) -> str | None:
    """The embedding feature ``embed`` fills: the object's ``embedding_feature``, else the model's
    only embedding feature; None without ``embed``. ConfigError when it cannot be told."""
    if not callable(getattr(user, "embed", None)):
        return None
    spec, features = cfg.training.entrypoint, cfg.model.embedding_features
    named = getattr(user, "embedding_feature", None)
    if named is not None:
        if named not in features:
            raise ConfigError(f"training.entrypoint {spec!r}: embedding_feature {named!r} is not an embedding "
                              f"feature of the model (model.features: {', '.join(features) or 'none'})")
        return str(named)
    if len(features) > 1:
        raise ConfigError(f"training.entrypoint {spec!r}: the model has embedding features {', '.join(features)}; "
                          "say which one embed() fills with an embedding_feature attribute")
    return features[0] if features else None


def build_entrypoint_model(cfg: DriftloopConfig, data: pd.DataFrame, seed: int | None = None,
                           previous: Path | None = None) -> EntrypointModel:
    """A fresh model of the entrypoint for ``cfg``'s task, weights drawn from ``seed``
    (default ``training.seed``); a regression target's scaling is fitted on ``data``, and its
    artifacts prepared from ``data`` and ``previous`` (a champion's folder; None for a first train)."""
    spec, m = str(cfg.training.entrypoint), cfg.model
    user = load_entrypoint(spec)
    artifacts = prepare_artifacts(spec, user, refs_of(data, m.id), previous)
    torch.manual_seed(cfg.training.seed if seed is None else seed)
    net = _built(spec, user, m.task, m.kind.n_outputs(m.classes), artifacts)
    scaling = m.kind.target_scaling(data[m.target].to_numpy())
    model = EntrypointModel(spec, net, user, task=m.task, classes=m.classes, target_scaling=scaling,
                            embedding_feature=embedding_feature(cfg, user), id_column=m.id, artifacts=artifacts)
    check_model(cfg, model, data)
    return model


def warm_start(cfg: DriftloopConfig, model: Any, rows: pd.DataFrame) -> Any:
    """The champion's copy ``model`` ready to fine-tune on ``rows`` (a retrain's training rows).
    Without ``prepare_artifacts``, the copy as it is. With it, the artifacts prepared again for
    ``rows`` with the champion's as ``previous``, the network built on them (``training.seed``
    draws what a grown tensor gains) and the champion's weights loaded into it (:func:`load_grown`).
    Either way checked like a fresh model (:func:`check_model`)."""
    user, spec = model.user, model.spec
    if not callable(getattr(user, "prepare_artifacts", None)):
        check_model(cfg, model, rows)
        return model
    artifacts = prepare_artifacts(spec, user, model.refs(rows), artifacts_folder(model))
    torch.manual_seed(cfg.training.seed)
    net = _built(spec, user, model.task, head_for(model.task).n_outputs(model.classes), artifacts)
    try:
        grown = load_grown(net, model.net.state_dict())
    except ValueError as exc:
        raise ConfigError(f"training.entrypoint {spec!r}: the network built on the artifacts prepared for this "
                          f"retrain does not take the champion's weights: {exc}") from exc
    if grown:
        log.info("warm start: %s grew with the new artifacts; the champion's values fill their leading block",
                 ", ".join(grown))
    fresh = EntrypointModel(spec, net, user, task=model.task, classes=model.classes,
                            target_scaling=model.target_scaling(), embedding_feature=model.embedding_feature,
                            id_column=model.id_column, artifacts=artifacts)
    check_model(cfg, fresh, rows)
    return fresh


def artifacts_folder(model: Any) -> Path | None:
    """A model's artifacts folder; None for a model without (or pickled before artifacts existed)."""
    artifacts = getattr(model, "artifacts", None)
    return None if artifacts is None else artifacts.folder


def prepare_artifacts(spec: str, user: Any, refs: Sequence[str], previous: Path | None) -> Artifacts | None:
    """The user's ``prepare_artifacts(refs, previous, out)`` into a fresh folder; None without one.
    ``previous`` is handed as a copy, so the code may read or change it at will while the champion
    whose folder it is goes on scoring. ConfigError naming the spec when it raises."""
    hook = getattr(user, "prepare_artifacts", None)
    if not callable(hook):
        return None
    artifacts = Artifacts.empty()
    with tempfile.TemporaryDirectory(prefix="driftloop-previous-") as tmp:
        given = None
        if previous is not None:
            given = Path(tmp) / "previous"
            shutil.copytree(previous, given)
        try:
            hook(list(refs), given, artifacts.folder)
        except (Exception, SystemExit) as exc:
            raise EntrypointError(f"training.entrypoint {spec!r}: prepare_artifacts on {len(refs)} training row(s) "
                                  f"failed: {said(exc)}") from exc
    return artifacts


def load_grown(net: nn.Module, state: dict[str, torch.Tensor]) -> list[str]:
    """Load ``state`` (the champion's network) into ``net`` (built on artifacts prepared again).
    A tensor of the same shape is copied; one that grew (the same rank, no axis shorter: an
    embedding of a vocabulary with words appended) gets the old values in its leading block and
    keeps ``net``'s fresh initialisation in the rest, so an old id still finds its row. Returns
    the grown tensors' names; ValueError naming tensors that shrank, changed rank, or are absent
    from one side (the network's code changed)."""
    own = net.state_dict()
    absent, extra = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    if absent or extra:
        raise ValueError(f"tensors only in the new network: {absent}; only in the champion's: {extra}")
    merged: dict[str, torch.Tensor] = {}
    grown: list[str] = []
    misfits: list[str] = []
    for name, old in state.items():
        new = own[name]
        if new.shape == old.shape:
            merged[name] = old
        elif new.dim() == old.dim() and all(n >= o for n, o in zip(new.shape, old.shape)):
            block = new.detach().clone()
            block[tuple(slice(0, o) for o in old.shape)] = old
            merged[name] = block
            grown.append(name)
        else:
            misfits.append(f"{name} {list(old.shape)} -> {list(new.shape)}")
    if misfits:
        raise ValueError(f"{'; '.join(misfits)} (a tensor may only grow: append to a vocabulary, never "
                         "reorder or drop)")
    net.load_state_dict(merged)
    return grown


def _built(spec: str, user: Any, task: str, n_outputs: int, artifacts: Artifacts | None) -> nn.Module:
    """The user's network; ConfigError naming the spec when ``build_model`` raises or returns
    something other than an ``nn.Module``."""
    try:
        net = build_net(user, task, n_outputs, artifacts)
    except (Exception, SystemExit) as exc:
        raise EntrypointError(f"training.entrypoint {spec!r}: build_model({task!r}, {n_outputs}) failed: "
                              f"{said(exc)}") from exc
    if not isinstance(net, nn.Module):
        raise ConfigError(f"training.entrypoint {spec!r}: build_model returned {type(net).__name__}, "
                          "expected a torch.nn.Module")
    return net


def check_model(cfg: DriftloopConfig, model: EntrypointModel, rows: pd.DataFrame) -> None:
    """When training starts: the first :data:`CHECK_ROWS` rows read through the user's dataset and
    collate, then one forward (and ``embed``) in eval mode without gradients, checked against the
    config: the declared inputs (``input_spec``) against what the dataset yields, the output width
    against the task's outputs for ``model.classes``, the embedding's length against its feature's
    ``dim``; and the optimizer's parameter groups (``param_groups``). One ConfigError naming the
    key, expected and got, instead of a model that trains, registers, and fails its first logged
    batch. Torch's RNG is left as it was (a resumed run stays bit-identical)."""
    spec, m = str(cfg.training.entrypoint), cfg.model
    _check_param_groups(spec, model, cfg.training.learning_rate)
    rows = rows.head(CHECK_ROWS)
    if len(rows) == 0:
        return
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        try:
            items = model.inputs(rows, False)
            batch = model.collate([items[i] for i in range(len(rows))])
        except (Exception, SystemExit) as exc:
            raise EntrypointError(f"training.entrypoint {spec!r}: reading {len(rows)} training row(s) through "
                                  f"dataset(refs, train=False) and collate failed: {said(exc)}") from exc
        inputs = list(batch) if isinstance(batch, (list, tuple)) else [batch]
        _check_inputs(spec, model.input_specs, inputs)
        was = model.net.training
        model.net.eval()
        try:
            raw = model.net(*inputs)
            vectors = model.user.embed(model.net, *inputs) if model.embedding_feature else None
        except (Exception, SystemExit) as exc:
            raise EntrypointError(f"training.entrypoint {spec!r}: the network failed on {len(rows)} training "
                                  f"row(s): {said(exc)}") from exc
        finally:
            model.net.train(was)
    _check_outputs(cfg, raw, len(rows))
    if vectors is not None and model.embedding_feature is not None:
        got, expected = int(vectors.reshape(vectors.shape[0], -1).shape[1]), m.embedding_dim(model.embedding_feature)
        if got != expected:
            raise ConfigError(f"model.features: embedding feature {model.embedding_feature!r} has dim {expected}, "
                              f"but training.entrypoint {spec!r}'s embed() returns {got} values per row")


def _check_param_groups(spec: str, model: Any, lr: float) -> None:
    """The groups the loop builds AdamW from, built once here: a group the optimizer refuses (a
    parameter in two groups, an option it lacks, nothing left to train) is a ConfigError now."""
    grouping = getattr(model, "param_groups", None)  # a model pickled before the groups has none
    if grouping is None:
        return
    try:
        torch.optim.AdamW(grouping(lr), lr=lr)
    except (Exception, SystemExit) as exc:  # the user's hook, or torch.optim's ValueError/TypeError/KeyError
        raise EntrypointError(f"training.entrypoint {spec!r}: param_groups: {said(exc)}") from exc


def _check_outputs(cfg: DriftloopConfig, raw: Any, rows: int) -> None:
    m = cfg.model
    expected = m.kind.n_outputs(m.classes)
    shape = tuple(raw.shape) if isinstance(raw, torch.Tensor) else None
    width = None if shape is None or len(shape) > 2 or shape[0] != rows else shape[1] if len(shape) == 2 else 1
    if width == expected:
        return
    key = f"model.classes ({len(m.classes)} classes)" if m.classes and expected > 1 else f"model.task {m.task}"
    want = f"[N, {expected}]" if expected > 1 else "[N] or [N, 1]"
    got = type(raw).__name__ if shape is None else f"[{', '.join(map(str, shape))}] for N={rows} rows"
    raise ConfigError(f"{key}: training.entrypoint {cfg.training.entrypoint!r}'s network must return {want}, "
                      f"got {got}")


def _check_inputs(spec: str, declared: list[InputSpec] | None, inputs: list[Any]) -> None:
    """What the dataset yields against ``input_spec``: the number of tensors, each one's rank,
    fixed axes and kind of dtype (float, integer, bool)."""
    if declared is None:
        return
    if len(inputs) != len(declared):
        raise ConfigError(f"training.entrypoint {spec!r}: input_spec declares {len(declared)} input(s) "
                          f"({', '.join(d.name for d in declared)}), the dataset and collate yield {len(inputs)}")
    for want, got in zip(declared, inputs):
        shape = tuple(got.shape) if isinstance(got, torch.Tensor) else None
        fits = shape is not None and len(shape) == len(want.shape) and _same_kind(got.dtype, want.torch_dtype) \
            and all(isinstance(a, str) or a == n for a, n in zip(want.shape, shape))
        if not fits:
            seen = type(got).__name__ if shape is None else f"{str(got.dtype).removeprefix('torch.')}{list(shape)}"
            raise ConfigError(f"training.entrypoint {spec!r}: input_spec {want.name!r} declares "
                              f"{want.dtype}[{', '.join(map(str, want.shape))}], the dataset and collate yield {seen}")


def _same_kind(a: torch.dtype, b: torch.dtype) -> bool:
    def kind(d: torch.dtype) -> str:
        return "bool" if d == torch.bool else "float" if d.is_floating_point else "int"
    return kind(a) == kind(b)


def with_refs(df: pd.DataFrame, cfg: DriftloopConfig, what: str) -> pd.DataFrame:
    """``df`` with ``input_uri`` filled from the id column (``model.id``, a store window's ``id``)
    where a row has none; DataError naming the rows that have neither."""
    n = len(df)
    uris = df[INPUT_URI] if INPUT_URI in df.columns else pd.Series([None] * n, index=df.index, dtype=object)
    id_col = cfg.model.id if cfg.model.id in df.columns else "id" if "id" in df.columns else None
    absent = uris.isna() | (uris.astype(str) == "")
    if id_col is not None:
        ids = df[id_col]
        uris = uris.astype(object).where(~absent, ids.astype(str).where(ids.notna(), None))
        absent = uris.isna()
    if absent.any():
        rows = np.nonzero(absent.to_numpy())[0]
        raise DataError(f"{what}: {len(rows)} row(s) have neither {INPUT_URI!r} nor an id column "
                        f"({cfg.model.id!r}) for training.entrypoint to read their input by (first at row {rows[0]})")
    out = df.copy()
    out[INPUT_URI] = uris.astype(object).to_numpy()
    return out


def frame_model(cfg: DriftloopConfig, df: pd.DataFrame) -> ModelConfig:
    """``cfg.model`` for checking ``df``: without the embedding feature that ``embed`` fills when
    ``df`` lacks it (absent or empty): the trained model computes it (:func:`add_embeddings`)."""
    user = load_entrypoint(str(cfg.training.entrypoint))
    name = embedding_feature(cfg, user)
    if name is None or (name in df.columns and df[name].notna().any()):
        return cfg.model
    return cfg.model.model_copy(update={"features": [f for f in cfg.model.features if f.name != name]})


def add_embeddings(model: Any, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the model's embedding column (one float32 array per row), computed by the
    model: the reference's embeddings change with each version, as a service's would."""
    name = getattr(model, "embedding_feature", None)
    if not name:
        return frame
    vectors = model.embeddings(frame)
    column = np.empty(len(frame), dtype=object)
    for i in range(len(frame)):
        column[i] = vectors[i].astype(np.float32)
    frame[name] = column
    return frame


def code_paths(spec: str) -> list[str]:
    """What MLflow's ``code_paths`` must carry for the spec's module to import where the model is
    loaded: its top-level package directory (or module file) when it is local code, nothing when
    it is installed (site-packages, the standard library)."""
    top = spec.partition(":")[0].split(".")[0]
    found = importlib.util.find_spec(top)
    if found is None:
        return []
    where = list(found.submodule_search_locations or []) or ([found.origin] if found.origin else [])
    installed = [*site.getsitepackages(), site.getusersitepackages(), sysconfig.get_paths()["stdlib"]]
    local = [p for p in where if Path(p).exists() and not any(str(Path(p)).startswith(str(Path(i))) for i in installed)]
    return local[:1]


def checked_rows(cfg: DriftloopConfig, df: pd.DataFrame, *, what: str, min_rows: int = 1) -> pd.DataFrame:
    """:func:`trainer.data.check_frame` of ``df``; with ``training.entrypoint`` first every row's
    ``input_uri`` (:func:`with_refs`), and the embedding column ``embed`` fills is optional."""
    from trainer.data import check_frame
    if not cfg.training.entrypoint:
        return check_frame(df, cfg.model, what=what, min_rows=min_rows)
    if not isinstance(df, pd.DataFrame) or len(df) == 0:
        return check_frame(df, cfg.model, what=what, min_rows=min_rows)  # its error for these
    df = with_refs(df, cfg, what)
    return check_frame(df, frame_model(cfg, df), what=what, min_rows=min_rows)


def example_rows(cfg: DriftloopConfig, model: Any, rows: pd.DataFrame) -> pd.DataFrame:
    """The input example logged with a model version: the raw features, or (an entrypoint model)
    the rows' ``input_uri``."""
    if hasattr(model, "training_data"):
        return rows[[INPUT_URI]].head(5)
    return rows[cfg.model.feature_names].head(5)
