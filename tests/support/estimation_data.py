"""Data and models for estimating multiclass and regression performance (tests and
bench/bench_estimation.py): features where a covariate shift moves the inputs and leaves
``P(y | x)`` alone, a 6-class target and a regression target with noise that depends on the
inputs, a small PyTorch MLP for each, and scored frames shaped as the store returns windows and as
the trainer saves a reference sample (monitor.tasks).

Features: numeric ``x0``..``x5`` (standard normal), categorical ``region``. ``shift`` moves x0 by
``shift``, widens x1 by ``1 + 0.5 shift``, moves x2 by ``-0.6 shift`` and region's mix from
40/30/20/10 % towards 10/20/30/40 %.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from torch import nn

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


class Mlp:
    """A small MLP trained with Adam as the trainer trains: standardised numbers, one-hot region."""

    def __init__(self, data: pd.DataFrame, task: str, epochs: int = 25, seed: int = 0):
        torch.manual_seed(seed)
        num = data[NUMERIC].to_numpy(np.float32)
        self.mu, self.sd = num.mean(axis=0), num.std(axis=0)
        x = self._design(data)
        self.task = task
        y = torch.tensor(data["label"].to_numpy())
        self.y_mean, self.y_sd = (float(y.double().mean()), float(y.double().std())) if task == "regression" else (0, 1)
        target = y if task == "multiclass" else ((y.double() - self.y_mean) / self.y_sd).float()
        self.net = nn.Sequential(nn.Linear(x.shape[1], 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                                 nn.Linear(64, K if task == "multiclass" else 1))
        opt = torch.optim.Adam(self.net.parameters(), lr=1e-3)
        for _ in range(epochs):
            for batch in torch.randperm(len(x)).split(256):
                out = self.net(x[batch])
                loss = (nn.functional.cross_entropy(out, target[batch]) if task == "multiclass"
                        else nn.functional.mse_loss(out[:, 0], target[batch]))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        self.net.eval()

    def _design(self, data: pd.DataFrame) -> torch.Tensor:
        num = (data[NUMERIC].to_numpy(np.float32) - self.mu) / self.sd
        onehot = np.stack([(data["region"] == r).to_numpy(np.float32) for r in REGIONS], axis=1)
        return torch.tensor(np.hstack([num, onehot]))

    def predict(self, data: pd.DataFrame) -> np.ndarray:
        with torch.no_grad():
            out = self.net(self._design(data)).double()
        return torch.softmax(out, dim=1).numpy() if self.task == "multiclass" else out[:, 0].numpy() * self.y_sd + self.y_mean


def scored_multiclass(model: Mlp, frame: pd.DataFrame, window: bool = True, labelled: float = 1.0) -> pd.DataFrame:
    """The store's shape: class indices, the served class's probability, ``__proba_<i>``."""
    proba = model.predict(frame)
    out = frame.copy()
    served = proba.argmax(axis=1)
    out["score"] = proba[np.arange(len(out)), served]
    for column, values in zip(internal_proba_columns(K), proba.T):
        out[column] = values
    if window:
        out["prediction"] = pd.array(served, dtype="Int64")
        label = pd.array(out["label"].to_numpy(), dtype="Int64")
        label[np.random.default_rng(1).uniform(size=len(out)) >= labelled] = pd.NA
        out["label"] = label
    return out


def scored_regression(model: Mlp, frame: pd.DataFrame, window: bool = True, labelled: float = 1.0) -> pd.DataFrame:
    out = frame.copy()
    out["score"] = model.predict(frame)
    if window:
        out["prediction"] = out["score"]
        out["label"] = out["label"].mask(np.random.default_rng(1).uniform(size=len(out)) >= labelled)
    return out
