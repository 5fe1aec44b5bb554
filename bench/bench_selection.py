"""Benchmark: the cost of telling labels chosen by the score (monitor.drift.selection) on a check window.

    .venv/bin/python bench/bench_selection.py                 # 20k, 200k and 1M rows
    .venv/bin/python bench/bench_selection.py --rows 50000 --repeats 7

For each window size, two labellings: a random 20 % share (tested, nothing chosen: the two tests
alone) and the rows scored 0.5 or more plus a 10 % audit (chosen: the tests and the estimate on the
labelled rows and on the period). The baseline, measured in the same run on the same window, is the
label-free estimate of the whole window that every check computes already (``estimate``: CBPE's
accuracy, ROC AUC, precision, recall and F1). Prints medians and the ratio to the baseline.
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
from monitor.drift.estimation import estimate  # noqa: E402
from monitor.drift.estimators import fit_estimator  # noqa: E402
from monitor.drift.frames import labelled_rows  # noqa: E402
from monitor.drift.selection import label_selection  # noqa: E402

CFG = ModelConfig(features=[{"name": "x"}], task="binary")


def _window(rng: np.random.Generator, n: int) -> pd.DataFrame:
    x = rng.standard_normal(n)
    s = 1 / (1 + np.exp(-3 * x))
    return pd.DataFrame({"x": x, "score": s, "prediction": (s >= 0.5).astype(int),
                         "label": (rng.uniform(size=n) < s).astype(float),
                         "ts": pd.date_range("2026-01-01", periods=n, freq="s", tz="UTC")})


def _median(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="*", default=[20_000, 200_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    reference = _window(rng, 20_000)
    estimator = fit_estimator(CFG, reference, labelled_rows(reference, CFG, "reference"))
    print(f"{'rows':>9} {'labels':>9} {'chosen':>6} {'selection s':>12} {'estimate s':>11} {'ratio':>6}")
    for n in args.rows:
        window = _window(rng, n)
        score, served = window["score"].to_numpy(), window["prediction"].to_numpy()
        base = _median(lambda s=score, p=served: estimate(estimator, s, p), args.repeats)
        for name, keep in (("random", rng.uniform(size=n) < 0.2),
                           ("reviewed", (window["score"] >= 0.5).to_numpy() | (rng.uniform(size=n) < 0.1))):
            frame = window.copy()
            frame.loc[~keep, "label"] = np.nan
            found = label_selection(frame, CFG, estimator)
            took = _median(lambda f=frame: label_selection(f, CFG, estimator), args.repeats)
            print(f"{n:>9} {name:>9} {str(bool(found and found.chosen)):>6} {took:>12.3f} {base:>11.3f} "
                  f"{took / base:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
