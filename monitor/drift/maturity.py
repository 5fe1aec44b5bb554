"""Labels that arrive by outcome: which rows' labels have matured.

Many labels take a time that depends on the label itself. A chargeback says "fraud" within days;
"not fraud" is only known when the dispute window closes, months later. A churned customer is known
when they leave; a retained one only at the renewal date. A loan's default is known early, its full
repayment at the end of its term. The newest labelled rows then hold mostly the fast class: over
the last ``horizon`` before the newest label, the labelled rows are chosen by their outcome.

Judged as they are, such rows read as a performance change (accuracy on the fast class alone), and a
retrain right after a change learns from them: ``bench/bench_outside.py outcome_lag`` (positives
labelled 1 batch after the prediction, negatives 4) retrained on 490 rows that were all positives,
and the trainer refused them ("target has a single class"); with a few negatives among them it
would have learnt a prior of 90 % positives.

:func:`label_maturity` reads the delay of each labelled row (``label_ts - ts``: when the label was
stamped against when the prediction was made) per class. When one class's delays differ from the
others' within the same period of the window (each delay less its period's median: labels sent in
batches take their batch's time, and a class mix that drifts along the window must not read as
labels waiting for their outcome; ``prior_shift`` did before the periods), significantly (two-sample
Kolmogorov-Smirnov at ``ALPHA`` over the classes, at least ``MIN_DISTANCE`` apart) and materially
(the slowest class's labels later than the fastest's by ``MIN_EXCESS`` of the typical delay, and
by a second or more), the *horizon* is the ``QUANTILE`` of the slowest class's delay, and the rows
made within the horizon of the newest label are immature: whatever labels they have, the others have
not arrived yet. A check treats their labels as not yet arrived (:func:`withhold_immature`), a
retrain leaves them out (:func:`mature_rows`). Delays that do not depend on the class (every label a
day late, or a random share of rows labelled) leave nothing immature. Regression is not tested
(there is no class to compare delays by). Pure: no I/O.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import ks_2samp

from monitor.config import ModelConfig

ALPHA = 1e-3            # significance of a class's delays differing from the other classes'
MIN_DISTANCE = 0.2      # ... and its least KS distance
MIN_EXCESS = 0.5        # ... and the slowest class's labels later than the fastest's by this share of the typical delay
BUCKETS = 10            # periods of the window the delays are compared within
MAX_ROWS = 100_000      # labelled rows whose delays are compared at most (a seeded sample of a larger window)
QUANTILE = 0.95         # the slowest class's delay by which this share of its labels have arrived
MIN_CLASS_ROWS = 30     # labelled rows a class needs before its delays are compared


@dataclass(frozen=True)
class LabelMaturity:
    """How long labels take per class, and which rows' labels have not all arrived yet."""

    horizon_seconds: float          # rows made within this of the newest label are immature
    as_of: float                    # epoch seconds: the newest label's time
    delays: dict[str, float]        # per class: the QUANTILE of its label delay, seconds
    medians: dict[str, float]       # per class: its median label delay, seconds
    distance: float                 # the largest KS distance between a class's delays and the others'
    p_value: float
    immature_rows: int              # labelled rows whose labels are withheld (not yet matured)

    @property
    def cut(self) -> float:
        """Epoch seconds: rows made after this are immature."""
        return self.as_of - self.horizon_seconds

    def describe(self) -> str:
        per_class = ", ".join(f"{k} {_duration(v)}" for k, v in self.delays.items())
        return (f"labels arrive by outcome (95 % of each class within: {per_class}); the {self.immature_rows} "
                f"labelled rows made in the last {_duration(self.horizon_seconds)} before the newest label wait "
                "until the slower classes' labels have had time to arrive")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "cut": self.cut}


def label_maturity(frame: pd.DataFrame, model_cfg: ModelConfig) -> LabelMaturity | None:
    """The window's label maturity (module docstring), or None: a regression model, no ``ts`` or
    ``label_ts`` column, fewer than two classes with ``MIN_CLASS_ROWS`` labelled rows, or delays that
    do not depend on the class."""
    target = model_cfg.target
    if not model_cfg.kind.classifier or not len(frame) or any(
            c not in frame.columns for c in (target, "ts", "label_ts")):
        return None
    labelled = frame[target].notna() & frame["label_ts"].notna() & frame["ts"].notna()
    if int(labelled.sum()) < 2 * MIN_CLASS_ROWS:
        return None
    rows = frame.loc[labelled, [target, "ts", "label_ts"]]
    made, stamped = _seconds(rows["ts"]), _seconds(rows["label_ts"])
    as_of = float(stamped.max())
    every_made = made
    if len(rows) > MAX_ROWS:   # the delays of a seeded sample; the immature rows are counted on all
        keep = np.sort(np.random.default_rng(0).choice(len(rows), MAX_ROWS, replace=False))
        rows, made, stamped = rows.iloc[keep], made[keep], stamped[keep]
    delay = np.maximum(stamped - made, 0.0)   # a label stamped before its prediction: no delay
    classes = rows[target].astype(str).to_numpy()
    names, counts = np.unique(classes, return_counts=True)
    compared = [str(c) for c, n in zip(names, counts) if n >= MIN_CLASS_ROWS]
    if len(compared) < 2:
        return None
    # Compared within periods of the window (BUCKETS of equal labelled rows by ``ts``): labels sent in
    # batches take their batch's time, and a class mix that drifts along the window would make the
    # classes' delays differ although no label waited for its outcome (``prior_shift``).
    edges = np.quantile(made, np.linspace(0.0, 1.0, BUCKETS + 1)[1:-1])
    period = np.searchsorted(edges, made, side="right")
    excess = delay - pd.Series(delay).groupby(period).transform("median").to_numpy()
    distance, p_value = 0.0, 1.0
    for name in compared:
        mine = classes == name
        ks = ks_2samp(excess[mine], excess[~mine], method="asymp")   # exact is slow past a few thousand rows
        if float(ks.statistic) > distance:
            distance, p_value = float(ks.statistic), float(ks.pvalue)
    tests = len(compared) if len(compared) > 2 else 1   # two classes: one comparison, seen from either side
    if distance < MIN_DISTANCE or p_value * tests >= ALPHA:
        return None
    later = [float(np.mean(excess[classes == name])) for name in compared]   # the mean: a class-only period reads 0
    if max(later) - min(later) < max(1.0, MIN_EXCESS * float(np.median(delay))):
        return None   # significant, but not material: under a second, or under half the typical delay
    medians = {name: float(np.median(delay[classes == name])) for name in compared}
    delays = {name: float(np.quantile(delay[classes == name], QUANTILE)) for name in compared}
    horizon = max(delays.values())
    immature = int((every_made > as_of - horizon).sum())
    return LabelMaturity(horizon, as_of, delays, medians, distance, p_value, immature)


def withhold_immature(frame: pd.DataFrame, maturity: LabelMaturity | None, target: str) -> pd.DataFrame:
    """``frame`` with the labels of immature rows treated as not yet arrived (target and
    ``label_ts`` missing); ``frame`` itself when nothing is immature."""
    if maturity is None or not maturity.immature_rows:
        return frame
    young = _seconds(frame["ts"]) > maturity.cut
    if not young.any():
        return frame
    out = frame.copy()
    for name in (target, "label_ts"):
        if name in out.columns:
            out[name] = out[name].mask(young)
    return out


def mature_rows(frame: pd.DataFrame, maturity: LabelMaturity | None) -> pd.DataFrame:
    """The rows of ``frame`` (labelled rows, to learn from) made before the maturity cut."""
    if maturity is None or not len(frame):
        return frame
    keep = _seconds(frame["ts"]) <= maturity.cut
    return frame if bool(keep.all()) else frame[keep].reset_index(drop=True)


def _seconds(ts: pd.Series) -> np.ndarray:
    """Epoch seconds of a timestamp column (tz-aware or naive UTC); NaT as NaN."""
    values = pd.to_datetime(ts, utc=True)
    return (values - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy("float64", na_value=np.nan)


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.1f} s"
