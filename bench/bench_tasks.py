"""Benchmark: the closed loop for multiclass and regression models, through the same real ``driftloop serve``.

    .venv/bin/python bench/bench_tasks.py --quick                  # every scenario, short streams
    .venv/bin/python bench/bench_tasks.py mc_abrupt reg_abrupt     # some of them

The harness is ``bench_loop``'s (``run_scenario``: a baseline trained on the pre-drift concept, a
real daemon fed through the public client with the version that scored each batch, the model
service played by a loop scoring with the current ``@champion``, labels one batch late). The
streams are generated here: 8 numeric and 2 categorical features.

Multiclass (6 classes; each class a Gaussian blob in the numeric features with its own category mix):

- ``mc_stationary``  nothing changes (control: must open nothing)
- ``mc_abrupt``      the classes swap places (a permutation of the class means): equally learnable
- ``mc_prior``       class priors move from uniform to 45/25/12/8/6/4 %, P(x | class) unchanged
- ``mc_gradual``     the class means drift linearly to the permuted places over the drifted part
- ``mc_many``        30 classes (Zipf-like priors), nothing changes (control: many classes must not alarm)
- ``mc_uncertain``   nothing changes; only the rows the model is least sure of (top probability under 0.7)
                     and a 10 % audit get a label (uncertainty sampling; control: must open nothing)

Regression (y = f(x) + noise, in "demand" units around 100):

- ``reg_stationary`` nothing changes (control: must open nothing)
- ``reg_abrupt``     the target function changes (new coefficients, an interaction): equally learnable
- ``reg_gradual``    the coefficients move linearly to the new ones over the drifted part
- ``reg_noise``      the noise doubles (MAE rises; no model can win it back)
- ``reg_scale``      the target is 30 % larger (prices rise): the same function, in other units
- ``reg_high_value`` nothing changes; only the rows predicted above 115 and a 10 % audit get their true
                     value (control: must open nothing)

Printed by ``bench_loop.report``: for regression the pre / last20% / never columns are MAE (lower is
better) and the ratio to the pre-drift MAE is printed below. Goals (issue 20): no incident on the
controls; detection within 500 labelled rows of an abrupt onset; at most 2 promotions per drift
event; served accuracy over the last 20 % within 2 points of pre-drift (multiclass) and MAE within
10 % of pre-drift (regression) on the learnable scenarios.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import bench_loop  # noqa: E402

NUMERIC = [f"x{i}" for i in range(8)]
FEATURES = [{"name": n, "type": "numeric"} for n in NUMERIC] + [
    {"name": "region", "type": "categorical"}, {"name": "device", "type": "categorical"}]
REGIONS = np.array(["eu", "us", "apac", "latam"], dtype=object)
DEVICES = np.array(["mobile", "desktop", "tablet"], dtype=object)
CLASSES = ["bike", "bus", "car", "train", "tram", "walk"]
K = len(CLASSES)

_rng = np.random.default_rng(2026)
MEANS = _rng.normal(0.0, 1.15, size=(K, len(NUMERIC)))          # class blobs
REGION_MIX = _rng.dirichlet(np.ones(4) * 2.0, size=K)            # each class's own category mix
PERMUTED = MEANS[[3, 5, 0, 4, 1, 2]]                              # mc_abrupt: the classes swap places
PRIORS_AFTER = np.array([0.45, 0.25, 0.12, 0.08, 0.06, 0.04])
COEF = _rng.normal(0.0, 8.0, size=len(NUMERIC))
COEF_AFTER = _rng.normal(0.0, 8.0, size=len(NUMERIC))
REGION_EFFECT = {"eu": 6.0, "us": -4.0, "apac": 9.0, "latam": -8.0}


def _categoricals(rng: np.random.Generator, n: int, region_p: np.ndarray | None = None) -> pd.DataFrame:
    if region_p is None:
        region = REGIONS[rng.choice(4, size=n, p=[0.4, 0.3, 0.2, 0.1])]
    else:  # one mix per row
        cum = region_p.cumsum(axis=1)
        region = REGIONS[(rng.uniform(size=(n, 1)) > cum).sum(axis=1).clip(0, 3)]
    return pd.DataFrame({"region": region, "device": DEVICES[rng.choice(3, size=n, p=[0.5, 0.35, 0.15])]})


@dataclass
class TaskStream:
    name: str
    task: str
    learnable: bool = True
    control: bool = False
    expect_incident: bool = True
    label_rule: Callable[[np.random.Generator, np.ndarray], np.ndarray] | None = None  # which rows get a label

    features = FEATURES

    @property
    def classes(self) -> list[str] | None:
        return CLASSES if self.task == "multiclass" else None

    def batch(self, rng: np.random.Generator, n: int, progress: float | None) -> pd.DataFrame:
        return (self._multiclass if self.task == "multiclass" else self._regression)(rng, n, progress)

    def _multiclass(self, rng: np.random.Generator, n: int, progress: float | None) -> pd.DataFrame:
        drifted = progress is not None
        priors = PRIORS_AFTER if drifted and self.name == "mc_prior" else np.full(K, 1.0 / K)
        means = MEANS
        if drifted and self.name == "mc_abrupt":
            means = PERMUTED
        elif drifted and self.name == "mc_gradual":
            means = MEANS + (PERMUTED - MEANS) * float(progress)
        y = rng.choice(K, size=n, p=priors)
        x = means[y] + rng.standard_normal((n, len(NUMERIC)))
        frame = pd.DataFrame(x, columns=NUMERIC)
        mix = REGION_MIX[y]
        if drifted and self.name == "mc_abrupt":
            mix = REGION_MIX[[3, 5, 0, 4, 1, 2]][y]
        frame = pd.concat([frame, _categoricals(rng, n, mix)], axis=1)
        frame["label"] = np.asarray(CLASSES, dtype=object)[y]
        return frame

    def _regression(self, rng: np.random.Generator, n: int, progress: float | None) -> pd.DataFrame:
        drifted = progress is not None
        frame = pd.concat([pd.DataFrame(rng.standard_normal((n, len(NUMERIC))), columns=NUMERIC),
                           _categoricals(rng, n)], axis=1)
        x = frame[NUMERIC].to_numpy()
        coef, interaction, noise = COEF, 0.0, 4.0
        if drifted and self.name == "reg_abrupt":
            coef, interaction = COEF_AFTER, 6.0
        elif drifted and self.name == "reg_gradual":
            coef = COEF + (COEF_AFTER - COEF) * float(progress)
            interaction = 6.0 * float(progress)
        elif drifted and self.name == "reg_noise":
            noise = 8.0
        region = frame["region"].map(REGION_EFFECT).to_numpy(dtype=float)
        y = 100.0 + x @ coef + 5.0 * np.sin(2 * x[:, 1]) + interaction * x[:, 2] * x[:, 3] + region
        if drifted and self.name == "reg_scale":
            y = 1.3 * y
        frame["label"] = y + rng.normal(0.0, noise, size=n)
        return frame


def _uncertain(rng: np.random.Generator, scores: np.ndarray) -> np.ndarray:
    """Uncertainty sampling (active learning): a person labels the rows the model was least sure of
    (its top probability under 0.7), and a 10 % random audit of the rest."""
    top = scores.max(axis=1) if scores.ndim == 2 else scores
    return (top < 0.7) | (rng.uniform(size=len(top)) < 0.1)


def _high_value(rng: np.random.Generator, scores: np.ndarray) -> np.ndarray:
    """Only the rows predicted above 115 (a claim worth checking, about a quarter of them) get their
    true value, and a 10 % random audit of the rest."""
    return (scores > 115.0) | (rng.uniform(size=len(scores)) < 0.1)


MANY = [f"k{i:02d}" for i in range(30)]
_MANY_MEANS = np.random.default_rng(2027).normal(0.0, 1.6, size=(len(MANY), len(NUMERIC)))
_MANY_PRIORS = 1.0 / np.arange(1, len(MANY) + 1) ** 0.7
_MANY_PRIORS /= _MANY_PRIORS.sum()


@dataclass
class ManyClasses(TaskStream):
    """30 classes, each a blob in the numeric features, with Zipf-like priors; nothing changes."""

    @property
    def classes(self) -> list[str] | None:
        return MANY

    def batch(self, rng: np.random.Generator, n: int, progress: float | None) -> pd.DataFrame:
        y = rng.choice(len(MANY), size=n, p=_MANY_PRIORS)
        frame = pd.DataFrame(_MANY_MEANS[y] + rng.standard_normal((n, len(NUMERIC))), columns=NUMERIC)
        frame = pd.concat([frame, _categoricals(rng, n)], axis=1)
        frame["label"] = np.asarray(MANY, dtype=object)[y]
        return frame


SCENARIOS = {s.name: s for s in [
    TaskStream("mc_stationary", "multiclass", control=True, expect_incident=False),
    TaskStream("mc_abrupt", "multiclass"),
    TaskStream("mc_prior", "multiclass", expect_incident=False),
    TaskStream("mc_gradual", "multiclass"),
    ManyClasses("mc_many", "multiclass", control=True, expect_incident=False),
    TaskStream("reg_stationary", "regression", control=True, expect_incident=False),
    TaskStream("reg_abrupt", "regression"),
    TaskStream("reg_gradual", "regression"),
    TaskStream("reg_noise", "regression", learnable=False),
    TaskStream("reg_scale", "regression"),
    TaskStream("mc_uncertain", "multiclass", control=True, expect_incident=False, label_rule=_uncertain),
    TaskStream("reg_high_value", "regression", control=True, expect_incident=False, label_rule=_high_value),
]}


def main() -> int:
    return bench_loop.cli(__doc__, SCENARIOS, "bench-tasks-")


if __name__ == "__main__":
    sys.exit(main())
