"""Small multiclass (5 classes) and regression datasets on the demo schema's features
(trainer.synthetic), for the tests of the other tasks; ``shift`` changes the target function
(a concept change), not the features. :func:`task_config`: a test config of such a model."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from monitor.config import DriftloopConfig
from tests.trainer.conftest import make_config
from trainer.synthetic import make_dataset

CLASSES = ["ant", "bee", "cat", "dog", "eel"]
_REGION = {"eu": 0.0, "us": 1.0, "apac": 2.0, "latam": 3.0}


def _features(n: int, seed: int) -> pd.DataFrame:
    return make_dataset(n, seed=seed).drop(columns="label")


def multiclass_rows(n: int, seed: int = 0, shift: bool = False, names: bool = False) -> pd.DataFrame:
    """``label``: the class index (0-4; ``names``: the class name) of the largest of five linear
    scores of the features plus noise; ``shift`` permutes which score belongs to which class."""
    rows = _features(n, seed)
    rng = np.random.default_rng([seed, 5])
    x = rows[["x0", "x1", "x2", "x3", "x4"]].to_numpy()
    weights = np.random.default_rng(11).normal(0.0, 1.5, (5, 5))
    logits = x @ weights + np.eye(5)[rows["region"].map(_REGION).to_numpy().astype(int) % 5] * 1.5
    if shift:
        logits = logits[:, [2, 3, 4, 0, 1]]
    y = np.argmax(logits + rng.gumbel(0.0, 0.5, (n, 5)), axis=1)
    return rows.assign(label=np.asarray(CLASSES, dtype=object)[y] if names else y.astype(np.int64))


def regression_rows(n: int, seed: int = 0, shift: bool = False) -> pd.DataFrame:
    """``label``: a price-like number (mean about 100, spread about 15) from the features plus noise;
    ``shift`` changes the coefficients."""
    rows = _features(n, seed)
    rng = np.random.default_rng([seed, 7])
    x = rows[["x0", "x1", "x2", "x3", "x4"]].to_numpy()
    coef = np.array([-6.0, 9.0, 4.0, -3.0, 5.0]) if shift else np.array([8.0, -5.0, 3.0, 6.0, 2.0])
    y = 100.0 + x @ coef + 4.0 * x[:, 2] * x[:, 3] + 3.0 * rows["region"].map(_REGION).to_numpy(dtype=float)
    return rows.assign(label=y + rng.normal(0.0, 2.0, n))


ROWS = {"multiclass": multiclass_rows, "regression": regression_rows}


def task_config(home: Path, task: str, template: Path | None = None, model: dict | None = None,
                **sections: dict) -> DriftloopConfig:
    """The tests' fast config (tests/trainer/conftest.py) for a ``task`` model of these datasets,
    with the default MLP's width (64x32: INT8 parity of narrower nets is less steady)."""
    sections["training"] = {"hidden": [64, 32], **sections.get("training", {})}
    return make_config(home, template, model={"task": task, **({"classes": CLASSES} if task == "multiclass" else {}),
                                              **(model or {})}, **sections)
