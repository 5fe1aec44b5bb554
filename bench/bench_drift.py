"""Benchmark: driftloop's drift & performance check vs Evidently's default DataDriftPreset.

For each window size, both run on the same frames (reference and current of that many rows,
20 features: 14 numeric, 6 categorical; some drifted by a known amount, some not), each case
in a fresh subprocess so peak memory (max RSS) is its own. Prints time (median over repeats),
peak memory, the time ratio and per-feature verdict agreement.

    .venv/bin/python bench/bench_drift.py                       # 10k, 100k, 1M (the 1M preset takes ~100 s)
    .venv/bin/python bench/bench_drift.py --sizes 10000,100000  # scaled down
    .venv/bin/python bench/bench_drift.py --repeats 3 --warm 3  # more samples for ours

"ours" is ``evaluate_window`` (drift on <= drift.sample_size sampled rows with pinned methods,
prediction drift, accuracy/ROC AUC with intervals on all labelled rows, one merged snapshot);
"cold" prepares the reference, "warm" reuses it as the daemon does (DriftEvaluator cache).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Known drift per feature (current vs reference). Distances are Evidently's defaults for large
# windows: normed Wasserstein (numeric) and Jensen-Shannon (categorical), threshold 0.1.
NUMERIC = [f"n{i}" for i in range(14)]
CATEGORICAL = [f"c{i}" for i in range(6)]
DRIFT = {
    "n0": "mean +0.5 sd (W~0.5)", "n1": "mean +0.25 sd (W~0.25)", "n2": "sd x1.4 (W~0.32)",
    "n3": "mean +0.04 sd (W~0.04, below threshold)", "n4": "5-valued, mass moved (JS~0.2)",
    "n5": "lognormal, log-mean +0.3",
    "c0": "6 categories, mass moved (JS~0.25)", "c1": "4 categories, slight move (JS~0.04, below)",
}
_CATS = {"c0": 6, "c1": 4, "c2": 50, "c3": 3, "c4": 12, "c5": 2}


def _cat(rng, k, n, tilt=0.0):
    p = np.linspace(1.0, 2.0, k)
    p = p / p.sum()
    if tilt:
        p = p * np.exp(tilt * np.linspace(-1, 1, k))
        p = p / p.sum()
    idx = np.searchsorted(np.cumsum(p), rng.uniform(size=n), side="right").clip(0, k - 1)
    return np.array([f"v{i}" for i in range(k)], dtype=object)[idx]


def make_frame(n: int, seed: int, drifted: bool) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    d = 1.0 if drifted else 0.0
    cols: dict[str, np.ndarray] = {
        "n0": rng.normal(0.5 * d, 1, n), "n1": rng.normal(0.25 * d, 1, n), "n2": rng.normal(0, 1 + 0.4 * d, n),
        "n3": rng.normal(0.04 * d, 1, n),
        "n4": rng.choice(np.arange(5.0), n, p=[0.1, 0.15, 0.2, 0.25, 0.3] if drifted else [0.3, 0.25, 0.2, 0.15, 0.1]),
        "n5": np.exp(rng.normal(0.3 * d, 0.5, n)),
        "n6": rng.uniform(0, 1, n), "n7": rng.exponential(2.0, n), "n8": rng.normal(100, 15, n),
        "n9": rng.standard_t(5, n), "n10": rng.gamma(2.0, 1.0, n), "n11": rng.normal(0, 1, n),
        "n12": rng.integers(0, 1000, n).astype(float), "n13": rng.beta(2, 5, n),
    }
    for c, k in _CATS.items():
        tilt = {"c0": 1.2, "c1": 0.25}.get(c, 0.0) * d
        cols[c] = _cat(rng, k, n, tilt)
    frame = pd.DataFrame(cols)
    logit = 0.8 * frame["n0"] - 0.5 * frame["n2"] + 0.3 * frame["n11"] + (frame["c3"] == "v1") * 0.4
    frame["score"] = 1.0 / (1.0 + np.exp(-logit))
    frame["label"] = (rng.uniform(size=n) < frame["score"]).astype(np.int64)
    if not drifted:
        return frame
    frame["prediction"] = pd.array((frame["score"] >= 0.5).astype(int), dtype="Int64")
    label = pd.array(frame["label"].to_numpy(), dtype="Int64")
    label[rng.uniform(size=n) >= 0.5] = pd.NA  # half the window labelled
    frame["label"] = label
    return frame


def _config():
    from monitor.config import DriftConfig, FeatureSpec, ModelConfig
    features = [FeatureSpec(name=c) for c in NUMERIC] + [FeatureSpec(name=c, type="categorical") for c in CATEGORICAL]
    return ModelConfig(name="bench", features=features), DriftConfig()


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def worker(kind: str, n: int, warm: int) -> dict:
    """One case in this (fresh) process; returns what ``main`` prints as a JSON line."""
    # One-time process costs (imports, Evidently's and plotly's lazy initialisation on the first
    # report) are paid before timing, by both kinds alike: a daemon pays them once, not per check.
    t_import = time.perf_counter()
    from monitor.drift import DriftEvaluator, evaluate_window
    model_cfg, drift_cfg = _config()
    evaluate_window(make_frame(300, 3, drifted=False), make_frame(300, 4, drifted=True), model_cfg, drift_cfg, {})
    t_import = time.perf_counter() - t_import
    ref, cur = make_frame(n, 1, drifted=False), make_frame(n, 2, drifted=True)
    data_mb = _rss_mb()
    times: list[float] = []
    if kind == "ours":
        evaluator = DriftEvaluator()
        for _ in range(1 + warm):
            t = time.perf_counter()
            result = evaluator(ref, cur, model_cfg, drift_cfg, {"accuracy": 0.7, "roc_auc": 0.75})
            times.append(time.perf_counter() - t)
        verdicts = {f.name: bool(f.drifted) for f in result.features}
        scores = {f.name: float(f.score) for f in result.features}
        methods = {f.name: f.method for f in result.features}
    else:
        from evidently import DataDefinition, Dataset, Report
        from evidently.presets import DataDriftPreset
        definition = DataDefinition(numerical_columns=NUMERIC, categorical_columns=CATEGORICAL)
        cols = NUMERIC + CATEGORICAL
        t = time.perf_counter()
        snapshot = Report([DataDriftPreset()], include_tests=True).run(
            Dataset.from_pandas(cur[cols], data_definition=definition),
            Dataset.from_pandas(ref[cols], data_definition=definition))
        times.append(time.perf_counter() - t)
        verdicts, scores, methods = {}, {}, {}
        for r in snapshot.metric_results.values():
            params = r.metric_value_location.metric.params
            if params["type"].endswith("ValueDrift"):
                verdicts[params["column"]] = any(t.status.value == "FAIL" for t in r.tests)
                scores[params["column"]] = float(r.value)
                methods[params["column"]] = params["method"]
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"kind": kind, "n": n, "times": times, "peak_mb": peak_mb, "data_mb": data_mb, "import_s": t_import,
            "verdicts": verdicts, "scores": scores, "methods": methods}


def run_case(kind: str, n: int, warm: int) -> dict:
    cmd = [sys.executable, __file__, "--worker", kind, "--n", str(n), "--warm", str(warm)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if proc.returncode != 0:
        raise SystemExit(f"{kind} at n={n} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _median(xs):
    return statistics.median(xs) if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000", help="window rows per side, comma-separated")
    ap.add_argument("--repeats", type=int, default=1, help="fresh processes per case for ours (cold runs)")
    ap.add_argument("--warm", type=int, default=2, help="extra in-process runs of ours with the reference cached")
    ap.add_argument("--baseline-repeats", type=int, default=1, help="fresh processes per case for the preset")
    ap.add_argument("--verbose", action="store_true", help="print per-feature scores")
    ap.add_argument("--worker", choices=["ours", "default"], help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.n, args.warm if args.worker == "ours" else 0)))
        return

    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    print(f"driftloop drift benchmark: 20 features (14 numeric, 6 categorical), python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print("known drift: " + "; ".join(f"{k}: {v}" for k, v in DRIFT.items()) + "; others untouched\n")
    rows = []
    for n in sizes:
        ours = [run_case("ours", n, args.warm) for _ in range(args.repeats)]
        base = [run_case("default", n, 0) for _ in range(args.baseline_repeats)]
        cold = [r["times"][0] for r in ours]
        warm = [t for r in ours for t in r["times"][1:]]
        base_t = [r["times"][0] for r in base]
        v_ours, v_base = ours[0]["verdicts"], base[0]["verdicts"]
        agree = sum(v_ours[f] == v_base[f] for f in v_base)
        rows.append((n, _median(base_t), max(r["peak_mb"] for r in base), _median(cold), _median(warm),
                     max(r["peak_mb"] for r in ours), ours[0]["data_mb"], agree, len(v_base),
                     sum(v_base.values()), sum(v_ours.values())))
        if args.verbose or agree != len(v_base):
            print(f"n={n}: feature  default(method, score, drifted)  ours(method, score, drifted)")
            for f in v_base:
                print(f"  {f:4s} {base[0]['methods'][f]:>30s} {base[0]['scores'][f]:.4f} {v_base[f]!s:5s}   "
                      f"{ours[0]['methods'][f]:>13s} {ours[0]['scores'][f]:.4f} {v_ours[f]!s:5s}")
        print(f"n={n:>9,}: preset {rows[-1][1]:7.2f} s  ours cold {rows[-1][3]:6.2f} s warm {rows[-1][4]:6.2f} s  "
              f"verdicts agree {agree}/{len(v_base)}", flush=True)

    print("\n| rows per side | default preset: time | peak RSS | ours cold: time | ours warm: time | peak RSS "
          "| data alone | speed-up (cold / warm) | same verdict | drifted (preset / ours) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, bt, bm, ct, wt, om, dm, agree, total, db, do in rows:
        print(f"| {n:,} | {bt:.2f} s | {bm:,.0f} MB | {ct:.2f} s | {wt:.2f} s | {om:,.0f} MB | {dm:,.0f} MB "
              f"| {bt / ct:.1f}x / {bt / wt:.1f}x | {agree}/{total} | {db} / {do} |")
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f} (other work on the machine slows both sides)")
    print("times: median over runs (ours cold: --repeats processes; warm: --warm runs each); peak RSS: max RSS of "
          "the case's process, including Python, Evidently and both frames ('data alone': RSS once the frames exist); "
          "imports and Evidently's first-report initialisation are paid before timing, by both sides")


if __name__ == "__main__":
    main()
