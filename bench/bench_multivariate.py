"""Benchmark: multivariate drift (PCA reconstruction error) against NannyML's own, and beside per-feature drift.

Three parts:

* **nannyml** — NannyML's datasets, NannyML's ``DataReconstructionDriftCalculator`` (its defaults:
  65 % of the variance, band of the reference chunks' mean +- 3 sd) and driftloop's test
  (``monitor/drift/multivariate.py``) on the same rows: each analysis chunk is one check window. NannyML
  runs in its own interpreter (``--nannyml-python``, or this one when it imports ``nannyml``), which
  also names its data folder; driftloop reads the same CSV files. Printed per dataset: each
  chunk's error and band from both, which chunks each flags, and the ratios (driftloop / NannyML) of the
  error and of the band. Two driftloop columns: fitted on *all* reference rows (NannyML's setting) and
  *as deployed* (a seeded uniform sample of ``drift.sample_size`` = 20,000 reference rows, as the
  check's prepared reference holds).
* **joint** — what per-feature drift misses: the full check (``evaluate_window``: Evidently's
  per-feature tests and the multivariate test) on windows of 2,000 rows against a 10,000-row reference
  whose ``a`` and ``b`` correlate at 0.8, over ``--seeds`` windows per case: unchanged, correlation
  flipped to -0.8, weakened to 0.3, a categorical's link to a numeric flipped, and a mean shift of 0.3
  sd on ``a`` (which the per-feature tests see).
* **cost** — the demo schema (8 numeric, 2 categorical features), a 100,000-row window: fitting once per
  champion, the test per check, and the whole check with ``drift.multivariate`` on and off.

    python -m venv /tmp/nannyml && /tmp/nannyml/bin/pip install nannyml==0.13.1 statsmodels
    .venv/bin/python bench/bench_multivariate.py --nannyml-python /tmp/nannyml/bin/python
    .venv/bin/python bench/bench_multivariate.py --quick          # joint and cost only, fewer seeds

Without NannyML the first part is skipped (``--data DIR`` with NannyML's CSV files runs driftloop's
side alone).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from monitor.config import DriftConfig, ModelConfig  # noqa: E402
from monitor.drift.multivariate import MultivariateReference, fit_reference  # noqa: E402

# NannyML's datasets: (reference file, analysis file, feature columns, chunk size of its docs' examples).
DATASETS = {
    "car_loan": ("synthetic_car_loan_reference.csv", "synthetic_car_loan_analysis.csv",
                 ["car_value", "salary_range", "debt_to_income_ratio", "loan_length", "repaid_loan_on_prev_car",
                  "size_of_downpayment", "driver_tenure"], 5000),
    "car_loan_missing": ("synthetic_car_loan_dq_reference.csv", "synthetic_car_loan_dq_analysis.csv",
                         ["car_value", "salary_range", "debt_to_income_ratio", "loan_length",
                          "repaid_loan_on_prev_car", "size_of_downpayment", "driver_tenure"], 5000),
    "work_from_home": ("synthetic_sample_reference.csv", "synthetic_sample_analysis.csv",
                       ["distance_from_office", "salary_range", "gas_price_per_litre", "public_transportation_cost",
                        "wfh_prev_workday", "workday", "tenure"], 5000),
    "credit_card_multiclass": ("mc_reference.csv", "mc_analysis.csv",
                               ["acq_channel", "app_behavioral_score", "requested_credit_limit", "app_channel",
                                "credit_bureau_score", "stated_income", "is_customer"], 6000),
    "car_price_regression": ("regression_synthetic_reference.csv", "regression_synthetic_analysis.csv",
                             ["car_age", "km_driven", "price_new", "accident_count", "door_count", "fuel",
                              "transmission"], 6000),
    "california_housing": ("california_housing_reference.csv", "california_housing_analysis.csv",
                           ["MedInc", "HouseAge", "AveRooms", "AveBedrms", "Population", "AveOccup", "Latitude",
                            "Longitude"], 500),
}
SAMPLE_SIZE = DriftConfig().sample_size

# Run by NannyML's interpreter: its calculator with its defaults on each dataset, figures as JSON.
NANNYML_SCRIPT = r'''
import json, sys, time, warnings
from importlib import resources
import pandas as pd
import nannyml as nml
warnings.simplefilter("ignore")
datasets = json.loads(sys.argv[1])
folder = resources.files("nannyml.datasets.data")
out = {"version": nml.__version__, "data_dir": str(folder), "datasets": {}}
for name, (ref_file, ana_file, columns, chunk_size) in datasets.items():
    reference = pd.read_csv(folder / ref_file)
    analysis = pd.read_csv(folder / ana_file)
    started = time.perf_counter()
    calc = nml.DataReconstructionDriftCalculator(column_names=columns, chunk_size=chunk_size)
    calc.fit(reference)
    fitted = time.perf_counter()
    frame = calc.calculate(analysis).to_df()
    done = time.perf_counter()
    chunks = [{"period": r[("chunk", "period")], "start": int(r[("chunk", "start_index")]),
               "end": int(r[("chunk", "end_index")]), "value": float(r[("reconstruction_error", "value")]),
               "lower": r[("reconstruction_error", "lower_threshold")],
               "upper": float(r[("reconstruction_error", "upper_threshold")]),
               "alert": bool(r[("reconstruction_error", "alert")])} for _, r in frame.iterrows()]
    out["datasets"][name] = {"chunks": chunks, "fit_seconds": fitted - started, "calculate_seconds": done - fitted,
                             "continuous": list(calc.continuous_column_names),
                             "categorical": list(calc.categorical_column_names),
                             "components": int(calc._pca.n_components_)}
print(json.dumps(out))
'''


# ---------------------------------------------------------------- part 1: NannyML's datasets

def nannyml_figures(python: str | None) -> dict | None:
    """NannyML's figures on every dataset, from ``python`` (or this interpreter when it has NannyML)."""
    spec = json.dumps(DATASETS)
    env = {**os.environ, "NML_DISABLE_USAGE_LOGGING": "1"}   # NannyML otherwise reports usage over the network
    if python is None:
        os.environ.setdefault("NML_DISABLE_USAGE_LOGGING", "1")
        try:
            import nannyml  # type: ignore[import-not-found]  # noqa: F401
        except ImportError:
            return None
        python = sys.executable
    proc = subprocess.run([python, "-c", NANNYML_SCRIPT, spec], capture_output=True, text=True, timeout=1800, env=env)
    if proc.returncode:
        raise SystemExit(f"NannyML's run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def split_types(frame: pd.DataFrame, columns: list[str]) -> tuple[list[str], list[str]]:
    """NannyML's split when NannyML is not at hand: numbers (not booleans) are continuous."""
    numeric = [c for c in columns
               if pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])]
    return numeric, [c for c in columns if c not in numeric]


def deployed_sample(reference: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """The reference sample a check prepares (monitor.drift.frames.sample_positions): uniform, in order."""
    if len(reference) <= SAMPLE_SIZE:
        return reference
    rng = np.random.default_rng([seed, 0])
    return reference.iloc[np.sort(rng.choice(len(reference), size=SAMPLE_SIZE, replace=False))].reset_index(drop=True)


def judge(fitted: MultivariateReference, chunk: pd.DataFrame) -> tuple[float, float, float, bool]:
    error = float(fitted.errors_of(chunk).mean())
    band = fitted.band(len(chunk), 3.0)
    return error, band.lower, band.upper, not band.lower < error < band.upper


def compare_dataset(name: str, folder: Path, theirs: dict | None) -> dict:
    ref_file, ana_file, columns, chunk_size = DATASETS[name]
    reference, analysis = pd.read_csv(folder / ref_file), pd.read_csv(folder / ana_file)
    if theirs is not None:
        numeric, categorical = theirs["continuous"], theirs["categorical"]
        spans = [(c["start"], c["end"] + 1) for c in theirs["chunks"] if c["period"] == "analysis"]
    else:
        numeric, categorical = split_types(reference, columns)
        spans = [(s, min(s + chunk_size, len(analysis))) for s in range(0, len(analysis), chunk_size)]
    started = time.perf_counter()
    full = fit_reference(reference, numeric, categorical)
    fit_seconds = time.perf_counter() - started
    deployed = fit_reference(deployed_sample(reference), numeric, categorical)
    started = time.perf_counter()
    ours = [judge(full, analysis.iloc[a:b]) for a, b in spans]
    check_seconds = (time.perf_counter() - started) / len(spans)
    as_deployed = [judge(deployed, analysis.iloc[a:b]) for a, b in spans]
    # The reference's own chunks (cross-fitted errors) against the band: NannyML reports these too.
    ref_chunks, band = len(full.errors) // chunk_size, full.band(chunk_size, 3.0)
    ref_flags = sum(not band.lower < m < band.upper
                    for m in full.errors[:ref_chunks * chunk_size].reshape(ref_chunks, chunk_size).mean(axis=1))
    return {"name": name, "features": f"{len(numeric)} num + {len(categorical)} cat", "spans": spans,
            "components": len(full.components), "deployed_components": len(deployed.components), "ours": ours,
            "deployed": as_deployed, "fit_seconds": fit_seconds,
            "check_seconds": check_seconds, "reference_flags": ref_flags, "reference_chunks": ref_chunks}


def print_dataset(found: dict, theirs: dict | None) -> dict:
    name = found["name"]
    print(f"\n### {name} ({found['features']}, chunks of {DATASETS[name][3]:,} rows, components kept: "
          f"{found['components']}, as deployed {found['deployed_components']})")
    analysis = [c for c in theirs["chunks"] if c["period"] == "analysis"] if theirs else []
    head = "| chunk | rows | driftloop error | band | flagged | as deployed: error | band | flagged |"
    if theirs:
        head = ("| chunk | rows | NannyML error | NannyML band | NannyML alert | driftloop error | band | flagged | "
                "as deployed: error | band | flagged |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for i, ((a, b), (err, lo, hi, flag), (derr, dlo, dhi, dflag)) in enumerate(
            zip(found["spans"], found["ours"], found["deployed"])):
        ours = (f"{err:.4f} | {lo:.4f}–{hi:.4f} | {'**yes**' if flag else 'no'} | {derr:.4f} | {dlo:.4f}–{dhi:.4f} | "
                f"{'**yes**' if dflag else 'no'}")
        if theirs:
            c = analysis[i]
            low = c["lower"] if c["lower"] is not None else float("nan")
            print(f"| {i} | {b - a:,} | {c['value']:.4f} | {low:.4f}–{c['upper']:.4f} | "
                  f"{'**yes**' if c['alert'] else 'no'} | {ours} |")
        else:
            print(f"| {i} | {b - a:,} | {ours} |")
    flagged = [i for i, o in enumerate(found["ours"]) if o[3]]
    deployed = [i for i, o in enumerate(found["deployed"]) if o[3]]
    summary = {"dataset": name, "driftloop": flagged, "deployed": deployed,
               "reference_flags": f"{found['reference_flags']}/{found['reference_chunks']}",
               "fit_s": found["fit_seconds"], "check_s": found["check_seconds"]}
    if theirs:
        alerts = [i for i, c in enumerate(analysis) if c["alert"]]
        ref_alerts = sum(c["alert"] for c in theirs["chunks"] if c["period"] == "reference")
        ratio = [o[0] / c["value"] for o, c in zip(found["ours"], analysis)]
        width = [(o[2] - o[1]) / (c["upper"] - (c["lower"] or 0.0)) for o, c in zip(found["ours"], analysis)]
        agree = sum(o[3] == c["alert"] for o, c in zip(found["ours"], analysis))
        agree_deployed = sum(o[3] == c["alert"] for o, c in zip(found["deployed"], analysis))
        summary.update(nannyml=alerts, nannyml_reference=f"{ref_alerts}/{found['reference_chunks']}",
                       agree=f"{agree}/{len(analysis)}", agree_deployed=f"{agree_deployed}/{len(analysis)}",
                       error_ratio=(min(ratio), max(ratio)), band_ratio=statistics.median(width),
                       nannyml_s=theirs["fit_seconds"] + theirs["calculate_seconds"])
        print(f"error ratio driftloop/NannyML {min(ratio):.6f}–{max(ratio):.6f}; band width ratio (median) "
              f"{statistics.median(width):.3f}; chunks with the same verdict {agree}/{len(analysis)} "
              f"(as deployed {agree_deployed}/{len(analysis)})")
    return summary


def part_nannyml(args: argparse.Namespace) -> None:
    print("\n## NannyML's datasets: NannyML's DataReconstructionDriftCalculator vs driftloop")
    figures = nannyml_figures(args.nannyml_python)
    if figures is None and args.data is None:
        print("skipped: NannyML is not installed here; pass --nannyml-python (or --data with its CSV files)")
        return
    folder = Path(figures["data_dir"]) if figures else Path(args.data)
    if figures:
        print(f"NannyML {figures['version']}, data from {folder}")
    rows = []
    for name in DATASETS:
        if not (folder / DATASETS[name][0]).exists():
            print(f"\n### {name}: not in {folder}")
            continue
        theirs = figures["datasets"][name] if figures else None
        rows.append(print_dataset(compare_dataset(name, folder, theirs), theirs))
    print("\n| dataset | NannyML flags chunks | driftloop flags (all ref rows) | as deployed (20k ref sample) | "
          "same verdict | reference chunks flagged NannyML / driftloop | error ratio | band width ratio | "
          "NannyML fit+calculate s | driftloop fit s / check s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = r.get("error_ratio")
        print(f"| {r['dataset']} | {r.get('nannyml', '–')} | {r['driftloop']} | {r['deployed']} | "
              f"{r.get('agree', '–')} ({r.get('agree_deployed', '–')}) | {r.get('nannyml_reference', '–')} / "
              f"{r['reference_flags']} | {f'{ratio[0]:.6f}–{ratio[1]:.6f}' if ratio else '–'} | "
              f"{r.get('band_ratio', float('nan')):.3f} | {r.get('nannyml_s', float('nan')):.2f} | "
              f"{r['fit_s']:.3f} / {r['check_s']:.4f} |")


# ---------------------------------------------------------------- part 2: beside per-feature drift

JOINT_MODEL = ModelConfig(features=[{"name": n} for n in ("a", "b", "n0", "n1")]
                          + [{"name": "c", "type": "categorical"}])


def joint_rows(n: int, seed: int, *, rho: float = 0.8, flip_category: bool = False, shift: float = 0.0) -> pd.DataFrame:
    """``a``, ``b`` correlated at ``rho`` (standard normal marginals whatever ``rho``), ``n0``, ``n1``, and
    ``c`` = "hi" on the top 70 % of ``n0`` (``flip_category``: its bottom 70 %), with a score."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 4))
    n0 = z[:, 2]
    high = n0 < np.quantile(n0, 0.7) if flip_category else n0 > np.quantile(n0, 0.3)
    frame = pd.DataFrame({"a": z[:, 0] + shift, "b": rho * z[:, 0] + np.sqrt(1 - rho ** 2) * z[:, 1], "n0": n0,
                          "n1": z[:, 3], "c": pd.Series(np.where(high, "hi", "lo"), dtype=object)})
    frame["score"] = 1.0 / (1.0 + np.exp(-(z[:, 2] + z[:, 3])))
    frame["label"] = (rng.uniform(size=n) < frame["score"]).astype(int)
    return frame


def part_joint(args: argparse.Namespace) -> None:
    from monitor.drift import DriftEvaluator

    print(f"\n## Beside per-feature drift: the full check, 2,000-row windows, {args.seeds} per case")
    reference = joint_rows(10_000, seed=1)
    evaluator, drift = DriftEvaluator(), DriftConfig()
    cases: dict[str, dict[str, Any]] = {
        "unchanged": {}, "correlation 0.8 -> -0.8": {"rho": -0.8}, "correlation 0.8 -> 0.3": {"rho": 0.3},
        "categorical link flipped": {"flip_category": True}, "mean of a +0.3 sd": {"shift": 0.3}}
    print("| case | any feature drifted | dataset drift (share >= 0.5) | multivariate drifted | "
          "median error / upper |")
    print("|---|---:|---:|---:|---:|")
    for case, knobs in cases.items():
        any_feature = dataset = multi = 0
        ratios = []
        for seed in range(args.seeds):
            result = evaluator(reference, joint_rows(2000, seed=1000 + seed, **knobs), JOINT_MODEL, drift, None,
                               reference_key="joint")
            mv = result.multivariate
            assert mv is not None and mv.error is not None and mv.upper is not None
            any_feature += bool(result.drifted_features)
            dataset += result.dataset_drift
            multi += mv.drifted
            ratios.append(mv.error / mv.upper)
        print(f"| {case} | {any_feature}/{args.seeds} | {dataset}/{args.seeds} | {multi}/{args.seeds} | "
              f"{statistics.median(ratios):.3f} |")


# ---------------------------------------------------------------- part 3: cost

def part_cost(args: argparse.Namespace) -> None:
    from monitor.config import load_config
    from monitor.drift import DriftEvaluator
    from monitor.drift.frames import prepare_side
    from monitor.drift.multivariate import multivariate_drift, prepare_multivariate
    from trainer.synthetic import make_dataset

    cfg = load_config(path=None, environ={}, overrides={"home": "unused"})
    print(f"\n## Cost: demo schema (8 numeric, 2 categorical), {args.window:,}-row window, reference 50,000 rows, "
          f"medians of {args.repeats}")

    def scored(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.copy()
        frame["score"] = 1.0 / (1.0 + np.exp(-(frame["x0"] - frame["x1"])))
        return frame

    reference, window = scored(make_dataset(50_000, seed=1)), scored(make_dataset(args.window, seed=2))
    ref_side = prepare_side(reference, cfg.model, cfg.drift, np.random.default_rng([0, 0]), "reference")
    cur_side = prepare_side(window, cfg.model, cfg.drift, np.random.default_rng([0, 1]), "current window")

    def median_time(fn) -> float:
        times = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            fn()
            times.append(time.perf_counter() - started)
        return statistics.median(times)

    fitted = prepare_multivariate(ref_side.sample, cfg.model, cfg.drift)
    fit = median_time(lambda: prepare_multivariate(ref_side.sample, cfg.model, cfg.drift))
    test = median_time(lambda: multivariate_drift(fitted, cur_side.sample, cfg.drift))
    off = cfg.drift.model_copy(update={"multivariate": False})
    evaluators = {True: DriftEvaluator(), False: DriftEvaluator()}
    for on, evaluator in evaluators.items():   # warm: the reference is prepared once per champion
        evaluator(reference, window, cfg.model, cfg.drift if on else off, None, reference_key="v")
    whole = {on: median_time(lambda on=on: evaluators[on](reference, window, cfg.model, cfg.drift if on else off,
                                                            None, reference_key="v")) for on in (True, False)}
    print("| what | seconds |\n|---|---:|")
    print(f"| fit once per champion ({len(ref_side.sample):,} reference rows, cross-fitted) | {fit:.4f} |")
    print(f"| the test per check ({len(cur_side.sample):,} window rows: drift.sample_size) | {test:.4f} |")
    print(f"| whole check, multivariate on | {whole[True]:.3f} |")
    print(f"| whole check, multivariate off | {whole[False]:.3f} |")
    print(f"on / off: {whole[True] / whole[False]:.3f}; the test is {test / whole[True]:.1%} of the check")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nannyml-python", help="an interpreter with nannyml installed (its own virtual environment)")
    ap.add_argument("--data", help="a folder with NannyML's dataset CSV files (driftloop's side alone)")
    ap.add_argument("--seeds", type=int, default=20, help="windows per case in the joint part")
    ap.add_argument("--window", type=int, default=100_000, help="window rows in the cost part")
    ap.add_argument("--repeats", type=int, default=5, help="repeats of each timing (median)")
    ap.add_argument("--quick", action="store_true", help="joint and cost only, 5 seeds, 20,000-row window")
    ap.add_argument("--only", choices=["nannyml", "joint", "cost"], action="append", help="run only these parts")
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.window, args.repeats = 5, 20_000, 3
    parts = args.only or (["joint", "cost"] if args.quick else ["nannyml", "joint", "cost"])
    if "nannyml" in parts:
        part_nannyml(args)
    if "joint" in parts:
        part_joint(args)
    if "cost" in parts:
        part_cost(args)


if __name__ == "__main__":
    main()
