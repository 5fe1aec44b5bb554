"""Benchmark: the closed loop on streams unlike ``bench_loop``'s, through the same real ``driftloop serve``.

    .venv/bin/python bench/bench_outside.py --quick                 # every scenario, short streams
    .venv/bin/python bench/bench_outside.py no_version imbalance_auc

The harness is ``bench_loop``'s (``run_scenario``: a baseline trained on the pre-drift concept, a
real daemon fed through the public client, the model service played by a loop scoring with the
current ``@champion``); what differs is the streams and how the service behaves. Scenarios:

- ``dim3``            3 numeric features; the boundary turns 90 degrees
- ``dim30_subspace``  30 numeric features; the concept moves to features x20..x24 only (the rest unchanged)
- ``categorical``     6 categorical features (3-12 levels) and 1 numeric; category effects are reshuffled
- ``imbalance_auc``   10 % positives; the ranking signal moves to other features (accuracy barely moves, ROC AUC does)
- ``imbalance_ctrl``  10 % positives, nothing changes (control: must open nothing)
- ``prior_shift``     P(y) goes from 30 % to 65 %, P(x | y) unchanged
- ``early``           abrupt concept change after 2 batches
- ``late``            abrupt concept change with 20 % of the stream left
- ``recurring``       concept A, then B, then A again
- ``gradual_stop``    the boundary turns 90 degrees over 30 % of the drifted part, then stays
- ``delayed_labels``  abrupt change; labels arrive 5 batches late (goal: last 20 % within 5 points of pre-drift)
- ``sampled_labels``  abrupt change; only 20 % of rows ever get a label (goal: last 20 % within 5 points
                      of pre-drift). Both rest on judging by labelled rows (drift.judge_by_interval,
                      drift.labelled_window; docs/parts/drift.md)
- ``bursts``          abrupt change; traffic alternates 4x bursts and 1/4 lulls
- ``no_version``      abrupt change; the service never sends ``model_version``
- ``broken_null``     the concept holds; the upstream breaks and the strongest feature arrives missing (null)
- ``broken_unit``     the concept holds; the upstream sends the strongest feature in other units (x100)
- ``renamed``         the categorical stream; the upstream renames every category (the concept holds)
- ``seasonal``        the concept holds; two features the label barely reads swing in a cycle (no retrain wanted)
- ``high_card``       a 400-level categorical (a merchant id, Zipf-like) beside 5 numeric features; the
                      numeric boundary turns 90 degrees
- ``high_card_ctrl``  the same stream, nothing changes (control: a 400-level column must not alarm)
- ``new_levels``      the categorical stream; after the onset a quarter of the rows carry 4 new levels of
                      ``c5`` (new products) with strong effects of their own; the known levels hold
- ``label_glitch``    the concept holds; the labelling pipeline flips every label for 2 batches after the
                      onset, then is mended (goal: the served model at the end is as good as before)
- ``extrapolate``     the concept holds, but it is not linear (a wave in f0); after the onset f0 moves 2.5 sd
                      up, into a region the champion never saw (covariate shift that hurts)
- ``outcome_lag``     abrupt change; labels arrive by outcome: positives 1 batch after the prediction,
                      negatives 4 (chargebacks come fast, "no fraud" only when the dispute window closes)
- ``outcome_lag_ctrl`` the same labelling, nothing changes (control: the young rows' skew must not alarm)
- ``reviewed``        abrupt change; only reviewed rows get a label: every row the served model scores
                      0.5 or more, and a 10 % random audit of the rest (fraud, credit, moderation)
- ``reviewed_ctrl``   the same labelling, nothing changes (control: the labels' skew alone must not alarm)

The estimation check after a promotion trained on a skewed window (realised inside the estimate's
band after recalibration) is ``bench/bench_estimation_recal.py``: it needs the daemon's per-check
estimate, which this harness does not record.

Figures are printed by ``bench_loop.report`` (plus ROC AUC and any 5xx / traceback / daemon exit).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import bench_loop  # noqa: E402


def _numeric(n_features: int) -> list[dict]:
    return [{"name": f"f{i}", "type": "numeric"} for i in range(n_features)]


def _sigmoid_labels(rng: np.random.Generator, logit: np.ndarray) -> np.ndarray:
    return (rng.uniform(size=len(logit)) < 1 / (1 + np.exp(-logit))).astype(np.int64)


@dataclass
class Stream:
    """One scenario: ``make(rng, n, progress)`` returns feature columns and a ``label`` column."""
    name: str
    make: Callable[[np.random.Generator, int, float | None], pd.DataFrame]
    features: list[dict]
    learnable: bool = True
    control: bool = False
    expect_incident: bool = True
    label_lag: int = 1
    label_share: float = 1.0
    send_version: bool = True
    before: int | None = None             # onset batch; None: the command line's --before
    rows_factor: Callable[[int], float] = field(default=lambda t: 1.0)
    lag_rule: Callable[[np.ndarray], np.ndarray] | None = None   # labels -> batches until each arrives
    label_rule: Callable[[np.random.Generator, np.ndarray], np.ndarray] | None = None

    def batch(self, rng: np.random.Generator, n: int, progress: float | None) -> pd.DataFrame:
        return self.make(rng, n, progress)


def _rotating(n_features: int, angle: Callable[[float | None], float], scale: float = 3.0):
    def make(rng, n, progress):
        x = rng.standard_normal((n, n_features))
        a = np.deg2rad(angle(progress))
        logit = scale * (np.cos(a) * x[:, 0] + np.sin(a) * x[:, 1]) + 0.5 * x[:, 2]
        frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(n_features)])
        frame["label"] = _sigmoid_labels(rng, logit)
        return frame
    return make


def _abrupt(p: float | None) -> float:
    return 0.0 if p is None else 90.0


def _recurring(p: float | None) -> float:
    return 90.0 if p is not None and p < 0.5 else 0.0


def _gradual_stop(p: float | None) -> float:
    return 0.0 if p is None else 90.0 * min(1.0, p / 0.3)


def _subspace(rng, n, progress):
    x = rng.standard_normal((n, 30))
    if progress is None:
        logit = 2.5 * x[:, 0] - 2.0 * x[:, 1] + 1.5 * x[:, 2]
    else:
        logit = 2.5 * x[:, 20] - 2.0 * x[:, 21] + 1.5 * x[:, 22] + x[:, 23] * x[:, 24]
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(30)])
    frame["label"] = _sigmoid_labels(rng, logit)
    return frame


_LEVELS = {"c0": 3, "c1": 4, "c2": 5, "c3": 6, "c4": 8, "c5": 12}
_EFFECTS_A = {c: np.random.default_rng(100 + i).normal(0, 1.2, k) for i, (c, k) in enumerate(_LEVELS.items())}
_EFFECTS_B = {c: np.random.default_rng(200 + i).normal(0, 1.2, k) for i, (c, k) in enumerate(_LEVELS.items())}


def _categorical(rng, n, progress):
    effects = _EFFECTS_A if progress is None else _EFFECTS_B
    frame = pd.DataFrame({c: rng.integers(0, k, n) for c, k in _LEVELS.items()})
    logit = sum(effects[c][frame[c].to_numpy()] for c in _LEVELS)
    frame["amount"] = rng.standard_normal(n)
    logit = logit + 0.5 * frame["amount"].to_numpy()
    for c in _LEVELS:
        frame[c] = np.array([f"{c}_{v}" for v in range(_LEVELS[c])], dtype=object)[frame[c].to_numpy()]
    frame["label"] = _sigmoid_labels(rng, logit)
    return frame


def _imbalanced(drift: bool):
    def make(rng, n, progress):
        x = rng.standard_normal((n, 6))
        if progress is None or not drift:
            signal = 2.0 * x[:, 0] + 1.5 * x[:, 1]
        else:
            signal = 2.0 * x[:, 3] + 1.5 * x[:, 4]
        logit = signal - 3.6   # about 10 % positives either way
        frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(6)])
        frame["label"] = _sigmoid_labels(rng, logit)
        return frame
    return make


def _prior_shift(rng, n, progress):
    positive_rate = 0.3 if progress is None else 0.65
    y = (rng.uniform(size=n) < positive_rate).astype(np.int64)
    x = rng.standard_normal((n, 5))
    x[:, 0] += 1.2 * y
    x[:, 1] -= 0.8 * y
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(5)])
    frame["label"] = y
    return frame


def _broken(how: str):
    """The concept holds; after the onset the service's upstream breaks the strongest feature ``f0``:
    ``null`` (every value missing) or ``unit`` (sent in other units, x100)."""
    honest = _rotating(8, lambda p: 0.0)

    def make(rng, n, progress):
        frame = honest(rng, n, progress)
        if progress is not None:
            frame["f0"] = np.nan if how == "null" else frame["f0"] * 100.0
        return frame
    return make


def _renamed(rng, n, progress):
    """The categorical stream with its concept unchanged; after the onset the upstream renames every
    category (``c0_1`` -> ``C0-1``): the champion has never seen one of them."""
    frame = _categorical(rng, n, None)
    if progress is not None:
        for c in _LEVELS:
            frame[c] = frame[c].str.upper().str.replace("_", "-")
    return frame


def _seasonal(rng, n, progress):
    """The concept holds; after the onset two features the label barely reads (f3, f4) swing with a
    cycle (three periods over the drifted part, amplitude 1.5 sd): real drift, no harm to the model."""
    frame = _rotating(8, lambda p: 0.0)(rng, n, progress)
    if progress is not None:
        swing = 1.5 * np.sin(2 * np.pi * 3 * progress)
        frame["f3"] += swing
        frame["f4"] -= swing
    return frame


_MERCHANTS = 400
_MERCHANT_P = 1.0 / np.arange(1, _MERCHANTS + 1) ** 0.8
_MERCHANT_P /= _MERCHANT_P.sum()
_MERCHANT_EFFECT = np.random.default_rng(300).normal(0, 0.8, _MERCHANTS)


def _high_card(drift: bool):
    """5 numeric features and a 400-level ``merchant`` (Zipf-like frequencies, an effect each); with
    ``drift`` the numeric boundary turns 90 degrees after the onset, the merchants' effects hold."""
    def make(rng, n, progress):
        x = rng.standard_normal((n, 5))
        m = rng.choice(_MERCHANTS, size=n, p=_MERCHANT_P)
        a = np.deg2rad(90.0 if drift and progress is not None else 0.0)
        logit = 2.5 * (np.cos(a) * x[:, 0] + np.sin(a) * x[:, 1]) + 0.5 * x[:, 2] + _MERCHANT_EFFECT[m]
        frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(5)])
        frame["merchant"] = np.array([f"m{v:03d}" for v in range(_MERCHANTS)], dtype=object)[m]
        frame["label"] = _sigmoid_labels(rng, logit)
        return frame
    return make


_NEW_EFFECTS = np.array([2.5, -2.5, 2.0, -2.0])


def _new_levels(rng, n, progress):
    """The categorical stream; after the onset a quarter of the rows carry one of 4 levels of ``c5``
    never seen before (``c5_new0``..``c5_new3``), each with a strong effect; everything else holds."""
    frame = _categorical(rng, n, None)
    if progress is None:
        return frame
    new = rng.uniform(size=n) < 0.25
    which = rng.integers(0, len(_NEW_EFFECTS), n)
    logit = sum(_EFFECTS_A[c][frame[c].str.rsplit("_", n=1).str[1].astype(int).to_numpy()] for c in _LEVELS)
    logit = logit + 0.5 * frame["amount"].to_numpy()
    old_c5 = _EFFECTS_A["c5"][frame["c5"].str.rsplit("_", n=1).str[1].astype(int).to_numpy()]
    logit = np.where(new, logit - old_c5 + _NEW_EFFECTS[which], logit)
    frame.loc[new, "c5"] = np.array([f"c5_new{v}" for v in range(len(_NEW_EFFECTS))], dtype=object)[which[new]]
    frame["label"] = _sigmoid_labels(rng, logit)
    return frame


def _label_glitch(rng, n, progress):
    """The concept holds; for the first 10 % of the drifted part the labels sent are flipped."""
    frame = _rotating(8, lambda p: 0.0)(rng, n, progress)
    if progress is not None and progress < 0.1:
        frame["label"] = 1 - frame["label"]
    return frame


def _reviewed(rng: np.random.Generator, scores: np.ndarray) -> np.ndarray:
    """Which rows get a label when only flagged rows are reviewed: every row scored 0.5 or more (the
    model's positives, sent to a person), and a 10 % random audit of the rest."""
    return (scores >= 0.5) | (rng.uniform(size=len(scores)) < 0.1)


def _extrapolate(rng, n, progress):
    """P(y | x) never changes: logit = 3 sin(1.5 f0) + f1 - 0.5 f2. After the onset f0 is drawn around
    2.5 instead of 0, where the wave the champion learnt between -2 and 2 turns the other way."""
    x = rng.standard_normal((n, 6))
    if progress is not None:
        x[:, 0] += 2.5
    logit = 3.0 * np.sin(1.5 * x[:, 0]) + x[:, 1] - 0.5 * x[:, 2]
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(6)])
    frame["label"] = _sigmoid_labels(rng, logit)
    return frame


def _by_outcome(y: np.ndarray) -> np.ndarray:
    """Batches until each label arrives when labels arrive by outcome: a positive after 1, a negative after 4."""
    return np.where(y == 1, 1, 4)


def _bursts(t: int) -> float:
    return (4.0, 0.25, 1.0)[t % 3]


STREAMS = {s.name: s for s in [
    Stream("dim3", _rotating(3, _abrupt), _numeric(3)),
    Stream("dim30_subspace", _subspace, _numeric(30)),
    Stream("categorical", _categorical,
           [{"name": c, "type": "categorical"} for c in _LEVELS] + [{"name": "amount", "type": "numeric"}]),
    Stream("imbalance_auc", _imbalanced(True), _numeric(6)),
    Stream("imbalance_ctrl", _imbalanced(False), _numeric(6), control=True, expect_incident=False),
    Stream("prior_shift", _prior_shift, _numeric(5)),
    Stream("early", _rotating(8, _abrupt), _numeric(8), before=2),
    Stream("late", _rotating(8, _abrupt), _numeric(8), before=-5),   # negative: that many batches before the end
    Stream("recurring", _rotating(8, _recurring), _numeric(8)),
    Stream("gradual_stop", _rotating(8, _gradual_stop), _numeric(8)),
    Stream("delayed_labels", _rotating(8, _abrupt), _numeric(8), label_lag=5),
    Stream("sampled_labels", _rotating(8, _abrupt), _numeric(8), label_share=0.2),
    Stream("bursts", _rotating(8, _abrupt), _numeric(8), rows_factor=_bursts),
    Stream("no_version", _rotating(8, _abrupt), _numeric(8), send_version=False),
    Stream("broken_null", _broken("null"), _numeric(8)),
    Stream("broken_unit", _broken("unit"), _numeric(8)),
    Stream("renamed", _renamed,
           [{"name": c, "type": "categorical"} for c in _LEVELS] + [{"name": "amount", "type": "numeric"}]),
    Stream("seasonal", _seasonal, _numeric(8), expect_incident=False),
    Stream("high_card", _high_card(True), _numeric(5) + [{"name": "merchant", "type": "categorical"}]),
    Stream("high_card_ctrl", _high_card(False), _numeric(5) + [{"name": "merchant", "type": "categorical"}],
           control=True, expect_incident=False),
    Stream("new_levels", _new_levels,
           [{"name": c, "type": "categorical"} for c in _LEVELS] + [{"name": "amount", "type": "numeric"}]),
    Stream("label_glitch", _label_glitch, _numeric(8)),
    Stream("extrapolate", _extrapolate, _numeric(6)),
    Stream("outcome_lag", _rotating(8, _abrupt), _numeric(8), lag_rule=_by_outcome),
    Stream("outcome_lag_ctrl", _rotating(8, lambda p: 0.0), _numeric(8), lag_rule=_by_outcome,
           control=True, expect_incident=False),
    Stream("reviewed", _rotating(8, _abrupt), _numeric(8), label_rule=_reviewed),
    Stream("reviewed_ctrl", _rotating(8, lambda p: 0.0), _numeric(8), label_rule=_reviewed,
           control=True, expect_incident=False),
]}


def _onset(stream: Stream, args) -> int:
    """A stream's own onset batch: ``--before`` unless it sets one (negative counts from the end)."""
    if stream.before is None:
        return args.before
    return stream.before if stream.before >= 0 else args.batches + stream.before


def main() -> int:
    return bench_loop.cli(__doc__, STREAMS, "bench-outside-", onset=_onset)


if __name__ == "__main__":
    sys.exit(main())
