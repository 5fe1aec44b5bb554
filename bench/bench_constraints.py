"""Benchmark: what checking a window against the constraints file adds to a check.

A 1,000-row baseline of the demo schema (``trainer.synthetic``, a fixed logistic scorer), the
constraints suggested from it (``suggest_constraints``), and a window of ``--rows`` rows with 5 % of
``x0`` out of range, 3 % unknown ``region`` values, 10 % of ``x1`` missing and ``device`` dropped.
Measured in the same run: the violations pass (:func:`monitor.drift.violations.check_constraints`)
against the whole drift check of that window without constraints (:func:`evaluate_window`), medians
of ``--repeats`` runs, and their ratio.

    .venv/bin/python bench/bench_constraints.py                  # 100,000 rows (~1 min)
    .venv/bin/python bench/bench_constraints.py --rows 1000000
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np
import pandas as pd


def _scored(frame: pd.DataFrame) -> pd.DataFrame:
    region = {"eu": 0.3, "us": -0.2, "apac": 0.6, "latam": -0.6}
    logit = (1.4 * frame["x0"] - 1.2 * frame["x1"] + 0.6 * np.log(frame["x5"])
             + frame["region"].map(region).fillna(0.0).astype(float))
    out = frame.copy()
    out["score"] = 1.0 / (1.0 + np.exp(-logit))
    out["prediction"] = (out["score"] >= 0.5).astype("int64")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    from monitor.config import load_config
    from monitor.drift import evaluate_window
    from monitor.drift.constraints import ConstraintsFile, parse_constraints, suggest_constraints
    from monitor.drift.violations import check_constraints
    from trainer.synthetic import make_dataset

    cfg = load_config(path=None, environ={}, overrides={"home": "unused"})
    baseline = _scored(make_dataset(1000, seed=3))
    body = suggest_constraints(baseline, cfg.model, champion_version="1", window_rows=cfg.drift.window_size)
    constraints = ConstraintsFile("constraints.json", parse_constraints(json.dumps(body), "constraints.json"))
    n = args.rows
    window = _scored(make_dataset(n, seed=11))
    window["label"] = pd.array(window["label"].to_numpy(), dtype="Int64")
    window.loc[: n // 20 - 1, "x0"] = 40.0 + np.arange(n // 20)
    window.loc[n // 2: n // 2 + 3 * n // 100 - 1, "region"] = "mars"
    window.loc[n // 4: n // 4 + n // 10 - 1, "x1"] = np.nan
    window["device"] = None
    window["ts"] = pd.Timestamp("2026-12-05", tz="UTC") + pd.to_timedelta(np.arange(n), unit="s")

    violations, checks = [], []
    found = None
    for _ in range(args.repeats):
        started = time.perf_counter()
        found = check_constraints(constraints, window, cfg.model)
        violations.append(time.perf_counter() - started)
        started = time.perf_counter()
        evaluate_window(baseline.drop(columns=["prediction"]), window, cfg.model, cfg.drift, {})
        checks.append(time.perf_counter() - started)
    assert found is not None
    v, c = statistics.median(violations), statistics.median(checks)
    print(f"rows {n:,}; {len(found.violations)} violations found: "
          + ", ".join(sorted(f"{x.column}:{x.check.value}" for x in found.violations)))
    print(f"violations pass: median {v * 1000:.1f} ms (min {min(violations) * 1000:.1f}, max "
          f"{max(violations) * 1000:.1f}) over {args.repeats} runs")
    print(f"drift check of the same window without constraints: median {c:.3f} s")
    print(f"ratio violations / check: {v / c:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
