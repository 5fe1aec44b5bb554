"""Data for the drift tests: the demo dataset (trainer.synthetic) scored by a fixed logistic
"model", shaped like a store window (Int64 target with NA where unlabelled, Int64 prediction)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from monitor.config import load_config
from trainer.synthetic import make_dataset

_REGION = {"eu": 0.3, "us": -0.2, "apac": 0.6, "latam": -0.6}


def score_frame(frame: pd.DataFrame, score_shift: float = 0.0) -> pd.DataFrame:
    """Add ``score`` and ``prediction`` from a fixed logistic scorer; ``score_shift`` moves the logit."""
    logit = (1.4 * frame["x0"] - 1.2 * frame["x1"] + 0.6 * np.log(frame["x5"])
             + frame["region"].map(_REGION).astype(float) + score_shift)
    out = frame.copy()
    out["score"] = 1.0 / (1.0 + np.exp(-logit))
    out["prediction"] = pd.array((out["score"] >= 0.5).astype(int), dtype="Int64")
    return out


def window(n: int, seed: int, *, covariate_shift: float = 0.0, concept_shift: float = 0.0,
           labelled: float = 1.0, score_shift: float = 0.0) -> pd.DataFrame:
    """A store-like window: ``labelled`` share of rows keep their label, the rest are NA."""
    frame = score_frame(make_dataset(n, seed=seed, covariate_shift=covariate_shift, concept_shift=concept_shift),
                        score_shift)
    label = pd.array(frame["label"].to_numpy(), dtype="Int64")
    hide = np.random.default_rng(seed + 1000).uniform(size=n) >= labelled
    label[hide] = pd.NA
    frame["label"] = label
    return frame


def reference(n: int = 5000, seed: int = 1) -> pd.DataFrame:
    """A baseline reference: features, int64 label and score (no prediction column, as trainer saves it)."""
    return score_frame(make_dataset(n, seed=seed)).drop(columns=["prediction"])


@pytest.fixture(scope="session")
def cfg():
    return load_config(path=None, environ={}, overrides={"home": "unused"})


@pytest.fixture(scope="session")
def ref_frame() -> pd.DataFrame:
    return reference()
