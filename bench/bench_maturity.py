"""Benchmark: the cost of reading label maturity (monitor.drift.maturity) on a check window.

    .venv/bin/python bench/bench_maturity.py                 # 20k, 200k and 1M rows
    .venv/bin/python bench/bench_maturity.py --rows 50000 --repeats 7

For each window size, two labellings: every label a random 1 to 10 minutes late whatever its class
(tested, nothing immature) and labels that arrive by outcome (positives within a minute, negatives
after 10 to 20 minutes: immature rows found and their labels withheld). Each row's label is present
only if it arrived by the window's last prediction. Timed: ``label_maturity`` and
``withhold_immature`` together, as a check runs them. The baseline, measured in the same run on the
same window, is the label-free estimate of the whole window that every check computes already
(``estimate``: CBPE's accuracy, ROC AUC, precision, recall and F1). Prints medians and the ratio.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from monitor.config import ModelConfig  # noqa: E402
from monitor.drift.estimation import Calibrator, estimate  # noqa: E402
from monitor.drift.estimators import fit_estimator  # noqa: E402
from monitor.drift.frames import labelled_rows  # noqa: E402
from monitor.drift.maturity import label_maturity, withhold_immature  # noqa: E402

CFG = ModelConfig(features=[{"name": "x"}], task="binary")


def _window(rng: np.random.Generator, n: int, by_outcome: bool) -> pd.DataFrame:
    x = rng.standard_normal(n)
    s = 1 / (1 + np.exp(-3 * x))
    y = (rng.uniform(size=n) < s).astype(int)
    made = 1_790_000_000.0 + np.arange(n) * 0.1
    delay = (np.where(y == 1, rng.uniform(5, 60, n), rng.uniform(600, 1200, n)) if by_outcome
             else rng.uniform(60, 600, n))
    arrived = made + delay <= made[-1]
    return pd.DataFrame({"x": x, "score": s, "prediction": pd.array((s >= 0.5).astype(int), dtype="Int64"),
                         "label": pd.Series(y, dtype="Int64").where(arrived),
                         "ts": pd.to_datetime(pd.Series(made), unit="s", utc=True),
                         "label_ts": pd.to_datetime(pd.Series(made + delay), unit="s", utc=True).where(arrived)})


def _median(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _check(frame: pd.DataFrame) -> pd.DataFrame:
    return withhold_immature(frame, label_maturity(frame, CFG), CFG.target)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="*", default=[20_000, 200_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    reference = _window(rng, 20_000, False)
    reference = reference[reference["label"].notna()].reset_index(drop=True)
    estimator = fit_estimator(CFG, reference, labelled_rows(reference, CFG, "reference"))
    assert isinstance(estimator, Calibrator)
    print(f"{'rows':>9} {'labels':>10} {'immature':>8} {'maturity s':>11} {'estimate s':>11} {'ratio':>6}")
    for n in args.rows:
        for name, by_outcome in (("random", False), ("by_outcome", True)):
            frame = _window(rng, n, by_outcome)
            score, served = frame["score"].to_numpy(), frame["prediction"].to_numpy()
            base = _median(lambda s=score, p=served: estimate(estimator, s, p), args.repeats)
            found = label_maturity(frame, CFG)
            took = _median(lambda f=frame: _check(f), args.repeats)
            print(f"{n:>9} {name:>10} {found.immature_rows if found else 0:>8} {took:>11.3f} {base:>11.3f} "
                  f"{took / base:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
