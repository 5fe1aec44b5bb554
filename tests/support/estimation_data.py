"""Data and models for estimating multiclass and regression performance (tests and
bench/bench_estimation.py): features where a covariate shift moves the inputs and leaves
``P(y | x)`` alone, a 6-class target and a regression target with noise that depends on the
inputs, the trainer's model for each (trained as ``driftloop train`` trains it), and scored frames
shaped as the store returns windows and as the trainer saves a reference sample (monitor.tasks).

Features: numeric ``x0``..``x5`` (standard normal), categorical ``region``. ``shift`` moves x0 by
``shift``, widens x1 by ``1 + 0.5 shift``, moves x2 by ``-0.6 shift`` and region's mix from
40/30/20/10 % towards 10/20/30/40 %.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from monitor.config import DriftloopConfig, load_config
from monitor.tasks import internal_proba_columns

K = 6
CLASSES = ["ant", "bee", "cat", "dog", "eel", "fox"]
NUMERIC = [f"x{i}" for i in range(6)]
REGIONS = np.array(["eu", "us", "apac", "latam"], dtype=object)
FEATURES = [{"name": n} for n in NUMERIC] + [{"name": "region", "type": "categorical"}]
_rng = np.random.default_rng(7)
WEIGHTS = _rng.normal(0.0, 1.0, size=(len(NUMERIC), K))
REGION_OFFSET = _rng.normal(0.0, 0.7, size=(len(REGIONS), K))


def _inputs(n: int, rng: np.random.Generator, shift: float) -> tuple[np.ndarray, np.ndarray]:
    """Features; ``shift`` moves x0, widens x1, moves x2 and the region mix (P(y | x) unchanged)."""
    x = rng.standard_normal((n, len(NUMERIC)))
    x[:, 0] += shift
    x[:, 1] *= 1.0 + 0.5 * shift
    x[:, 2] -= 0.6 * shift
    mix = (1 - min(shift, 1.0)) * np.array([0.4, 0.3, 0.2, 0.1]) + min(shift, 1.0) * np.array([0.1, 0.2, 0.3, 0.4])
    return x, rng.choice(len(REGIONS), size=n, p=mix)


def _frame(x: np.ndarray, region: np.ndarray) -> pd.DataFrame:
    frame = pd.DataFrame(x, columns=NUMERIC)
    frame["region"] = REGIONS[region]
    return frame


def multiclass_data(n: int, seed: int, shift: float = 0.0, concept: float = 0.0) -> pd.DataFrame:
    """``concept`` (0..1) moves P(y | x): classes 0 and 1 trade their weights on the numeric features."""
    rng = np.random.default_rng(seed)
    x, region = _inputs(n, rng, shift)
    weights = WEIGHTS.copy()
    weights[:, [0, 1]] = (1 - concept) * WEIGHTS[:, [0, 1]] + concept * WEIGHTS[:, [1, 0]]
    logits = x @ weights + REGION_OFFSET[region]
    logits[:, 0] += 1.5 * np.sin(2 * x[:, 3])
    logits[:, 1] += 1.2 * x[:, 4] * x[:, 5]
    proba = np.exp(1.3 * (logits - logits.max(axis=1, keepdims=True)))
    proba /= proba.sum(axis=1, keepdims=True)
    frame = _frame(x, region)
    frame["label"] = (rng.uniform(size=(n, 1)) > np.cumsum(proba, axis=1)).sum(axis=1).clip(0, K - 1)
    return frame


def regression_data(n: int, seed: int, shift: float = 0.0, noise: float = 1.0) -> pd.DataFrame:
    """y = f(x) + noise whose scale depends on x1, x0 and the region: a shift changes the MAE.
    ``noise`` scales the noise (a change of P(y | x) the inputs do not show)."""
    rng = np.random.default_rng(seed)
    x, region = _inputs(n, rng, shift)
    mean = (100 + 8 * x[:, 0] - 5 * x[:, 1] + 6 * np.sin(x[:, 2]) + 4 * x[:, 3] * x[:, 4]
            + np.array([0.0, 5.0, -5.0, 10.0])[region])
    scale = 3 + 3 * np.abs(x[:, 1]) + 2 * (x[:, 0] > 1) + np.array([0.0, 1.0, 2.0, 4.0])[region]
    frame = _frame(x, region)
    frame["label"] = mean + noise * scale * rng.standard_normal(n)
    return frame


def config(task: str, home: Path, **training: Any) -> DriftloopConfig:
    """A configuration of this schema's ``task`` model (multiclass: ``CLASSES``)."""
    model: dict[str, Any] = {"name": task[:2], "task": task, "features": FEATURES}
    if task == "multiclass":
        model["classes"] = CLASSES
    return load_config(path=None, environ={}, overrides={"home": str(home), "model": model, "training": training})


def trained(cfg: DriftloopConfig, data: pd.DataFrame) -> Any:
    """The trainer's model (trainer.build: the default MLP, its loss per task) fitted on 80 % of
    ``data`` with early stopping on the rest, on one thread, as ``driftloop train`` fits it."""
    from trainer.build import build_model
    from trainer.loop import LoopConfig
    from trainer.runs import fit_frames
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cut = int(0.8 * len(data))
        model = build_model(cfg, data.iloc[:cut])
        fit_frames(model, data.iloc[:cut], data.iloc[cut:], cfg.model.target, LoopConfig.from_training(cfg.training),
                   checkpoint_path=cfg.home / f"estimation-{cfg.model.name}.pt", resume=False)
    finally:
        torch.set_num_threads(threads)
    return model


def reference(cfg: DriftloopConfig, model: Any, held_out: pd.DataFrame) -> pd.DataFrame:
    """The reference sample exactly as the trainer saves it with the champion."""
    from trainer.baseline_training import reference_sample
    return reference_sample(cfg.model_copy(update={"training": cfg.training.model_copy(
        update={"reference_sample": len(held_out)})}), held_out, model=model, seed=0)


def scored_multiclass(model: Any, frame: pd.DataFrame, labelled: float = 1.0) -> pd.DataFrame:
    """A store window (monitor.tasks): the served class's index and probability, ``__proba_<i>``,
    an Int64 label (class index) kept on a ``labelled`` share of rows."""
    proba = model.predict_proba(frame)
    out = frame.copy()
    served = proba.argmax(axis=1)
    out["score"] = proba[np.arange(len(out)), served]
    for column, values in zip(internal_proba_columns(K), proba.T):
        out[column] = values
    out["prediction"] = pd.array(served, dtype="Int64")
    label = pd.array(out["label"].to_numpy(), dtype="Int64")
    label[np.random.default_rng(1).uniform(size=len(out)) >= labelled] = pd.NA
    out["label"] = label
    return out


def scored_regression(model: Any, frame: pd.DataFrame, labelled: float = 1.0) -> pd.DataFrame:
    """A store window: the predicted value as score and prediction, the label on a ``labelled`` share."""
    out = frame.copy()
    out["score"] = model.predict_proba(frame)
    out["prediction"] = out["score"]
    out["label"] = out["label"].mask(np.random.default_rng(1).uniform(size=len(out)) >= labelled)
    return out
