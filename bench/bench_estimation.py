"""Benchmark: how close performance estimated from the scores alone (CBPE) comes to the realised
accuracy, where it is blind, and what it adds to a check.

A real PyTorch MLP (the trainer's default) is trained on the demo dataset (trainer.synthetic); its
reference is 5,000 scored held-out rows, as the trainer saves. Then:

1. error: per window of ``--window`` rows, |estimated - realised| accuracy (median and p90 over
   ``--windows`` windows) and how often the realised accuracy falls inside the band, on a
   stationary stream, covariate shifts (features move, ``P(label | features)`` does not) and
   concept shifts (the labelling changes, the features do not: CBPE is blind to these);
2. cost: ``evaluate_window`` with the reference cached (as the daemon runs it), with and without
   ``drift.estimate``, at each of ``--sizes`` rows (median over ``--repeats``), the ratio, and the
   estimation's own time (the ratio alone drowns in load noise on a shared machine), and the time
   of per-segment performance over the demo schema's four segments (model.segments);
3. segment cost: the same check with 20 segments (``region``, ``device``, ``hour_of_day``,
   ``day_of_week`` and 16 more categorical features of 3 to 33 values) and with none, on one window
   and one schema, alternating; the added time and its share of the check;
4. the new tasks (bench_estimation_tasks.py; data from tests.support.estimation_data: 6 classes, or
   a regression target whose noise depends on the inputs; the trainer's MLP each, trained on 8,000
   rows; references of 5,000 held-out rows from the trainer's reference_sample): multiclass CBPE
   (|estimated - realised| accuracy, band coverage, macro F1 and macro ROC AUC errors) and
   regression DLE (relative MAE and RMSE errors, band coverage) per window on a stationary stream,
   covariate shifts and a shift of ``P(y | x)`` (blind), then the cost per check at ``--sizes``
   rows (with and without estimation, the estimation alone; CPU seconds) and the fit per champion.

    .venv/bin/python bench/bench_estimation.py                    # 50 windows; cost at 100k and 1M rows
    .venv/bin/python bench/bench_estimation.py --quick            # 20 windows; cost at 100k rows
    .venv/bin/python bench/bench_estimation.py --segments-only    # only (3), at --segment-rows rows
    .venv/bin/python bench/bench_estimation.py --tasks-only       # only (4)
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT, ROOT / "bench"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

SEGMENTS = ["region", "device", "hour_of_day", "day_of_week"]  # every segment the demo schema has
SCENARIOS = (  # name, make_dataset knobs
    ("stationary", {}),
    ("covariate 0.5", {"covariate_shift": 0.5}),
    ("covariate 1.0", {"covariate_shift": 1.0}),
    ("covariate 2.0", {"covariate_shift": 2.0}),
    ("concept 0.5", {"concept_shift": 0.5}),
    ("concept 1.0", {"concept_shift": 1.0}),
)


def train(cfg):
    import torch

    from trainer.build import build_model
    from trainer.loop import LoopConfig
    from trainer.runs import fit_frames
    from trainer.synthetic import make_dataset
    torch.set_num_threads(1)
    data = make_dataset(10_000, seed=0)
    model = build_model(cfg, data.iloc[:8000])
    fit_frames(model, data.iloc[:8000], data.iloc[8000:], "label", LoopConfig.from_training(cfg.training),
               checkpoint_path=cfg.home / "bench.pt", resume=False)
    return model


def scored(model, n, seed, **knobs):
    from trainer.synthetic import make_dataset
    frame = make_dataset(n, seed=seed, **knobs)
    frame["score"] = model.predict_proba(frame)
    frame["prediction"] = (frame["score"] > 0.5).astype("int64")
    return frame


def errors(model, calibrator, windows: int, rows: int) -> list[tuple]:
    from monitor.drift.estimation import estimate
    out = []
    for name, knobs in SCENARIOS:
        errs, inside, real_all, est_all = [], 0, [], []
        for i in range(windows):
            w = scored(model, rows, 10_000 + i, **knobs)
            e = estimate(calibrator, w["score"].to_numpy(), w["prediction"].to_numpy())
            real = float((w["prediction"] == w["label"]).mean())
            errs.append(abs(real - e.accuracy))
            inside += e.accuracy_ci[0] <= real <= e.accuracy_ci[1]
            real_all.append(real)
            est_all.append(e.accuracy)
        out.append((name, statistics.median(real_all), statistics.median(est_all), statistics.median(errs),
                    float(np.quantile(errs, 0.9)), inside / windows))
    return out


def cost(cfg, model, ref, sizes: list[int], repeats: int) -> list[tuple]:
    """Median check time without and with estimation (runs alternate, so drifting machine load hits
    both alike), and the estimation's own time (what ``evaluate_window`` adds: read the scores,
    estimate on all rows, the expected accuracy of the labelled ones)."""
    from monitor.drift import DriftEvaluator
    from monitor.drift.estimation import estimate, expected_accuracy
    from monitor.drift.frames import labelled_rows, scored_rows
    from monitor.drift.segments import segment_performance
    out = []
    off_cfg = cfg.drift.model_copy(update={"estimate": False})
    for n in sizes:
        w = scored(model, n, 99, covariate_shift=0.5)
        w["label"] = w["label"].astype("Int64")
        w.loc[w.index[n // 2:], "label"] = None  # half labelled
        w["ts"] = pd.Timestamp("2026-11-30", tz="UTC") + pd.to_timedelta(np.arange(n) * (7 * 86400 / n), unit="s")
        seg_cfg = cfg.model.model_copy(update={"segments": SEGMENTS})
        ev = DriftEvaluator()
        calibrator = ev.prepared(ref, cfg.model, cfg.drift, "v").calibrator
        ev(ref, w, cfg.model, cfg.drift, {}, reference_key="v")  # warm-up
        times: dict[str, list[float]] = {"without": [], "with": [], "alone": []}
        for _ in range(repeats):
            for label, drift_cfg in (("without", off_cfg), ("with", cfg.drift)):
                t0 = time.perf_counter()
                ev(ref, w, cfg.model, drift_cfg, {}, reference_key="v")
                times[label].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            rows = scored_rows(w, cfg.model, "current window")
            estimate(calibrator, rows.score, rows.pred)
            lab = labelled_rows(w, cfg.model, "current window")
            expected_accuracy(calibrator, lab.score, lab.pred)
            times["alone"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            segment_performance(w, seg_cfg, cfg.drift)
            times.setdefault("segments", []).append(time.perf_counter() - t0)
        out.append((n, *(statistics.median(times[k]) for k in ("without", "with", "alone", "segments"))))
    return out


EXTRA_SEGMENTS = 16


def segment_cost(cfg, model, rows: int, repeats: int) -> tuple[float, float, float, float]:
    """(check without segments, with 20 segments, segments alone, the latter's share of the check
    without): medians, the same window and schema (16 more categorical features besides the
    demo's), runs alternating. "Alone" is ``segment_performance`` timed by itself on the check's
    inputs. Times are the process's CPU time (``time.process_time``): on a shared machine, wall
    time measures the neighbours' load more than this code."""
    import inspect

    from monitor.drift.frames import prepare_side
    from monitor.drift.segments import segment_performance
    from monitor.config import FeatureSpec
    from monitor.drift import DriftEvaluator
    rng = np.random.default_rng(7)
    w = scored(model, rows, 98, covariate_shift=0.5)
    extra = [f"c{i}" for i in range(EXTRA_SEGMENTS)]
    for i, c in enumerate(extra):
        k = 3 + 2 * i
        w[c] = np.asarray([f"v{j}" for j in range(k)], dtype=object)[rng.integers(0, k, rows)]
    w["label"] = w["label"].astype("Int64")
    w.loc[w.index[rows // 2:], "label"] = None
    w["ts"] = pd.Timestamp("2026-11-30", tz="UTC") + pd.to_timedelta(np.arange(rows) * (7 * 86400 / rows), unit="s")
    ref = w.iloc[:5000].drop(columns=["prediction", "ts"]).copy()
    ref["label"] = scored(model, 5000, 50)["label"].to_numpy()
    features = cfg.model.features + [FeatureSpec(name=c, type="categorical") for c in extra]
    plain = cfg.model.model_copy(update={"features": features, "segments": []})
    segmented = cfg.model.model_copy(update={"features": features, "segments": SEGMENTS + extra})
    ev = DriftEvaluator()
    times: dict[str, list[float]] = {"without": [], "with": [], "alone": []}
    for label, mc in (("without", plain), ("with", segmented)):  # warm-up: the references are prepared
        ev(ref, w, mc, cfg.drift, {}, reference_key=label)
    prepared = ev.prepared(ref, segmented, cfg.drift, "with")
    side = prepare_side(w, segmented, cfg.drift, np.random.default_rng(1), "current window")
    extra_args = {"calibrator": prepared.calibrator, "sample": (getattr(side, "positions", None), side.sample)}
    accepted = inspect.signature(segment_performance).parameters  # an older release takes fewer
    extra_args = {k: v for k, v in extra_args.items() if k in accepted}
    for _ in range(repeats):
        for label, mc in (("without", plain), ("with", segmented)):
            t0 = time.process_time()
            result = ev(ref, w, mc, cfg.drift, {}, reference_key=label)
            times[label].append(time.process_time() - t0)
        t0 = time.process_time()
        segment_performance(w, segmented, cfg.drift, prepared.segments, **extra_args)
        times["alone"].append(time.process_time() - t0)
    assert len({s.segment for s in result.segments}) == len(SEGMENTS) + EXTRA_SEGMENTS
    without, with_, alone = (statistics.median(times[k]) for k in ("without", "with", "alone"))
    return without, with_, alone, alone / without


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--windows", type=int, default=50, help="windows per scenario")
    ap.add_argument("--window", type=int, default=1000, help="rows per window")
    ap.add_argument("--sizes", default="100000,1000000", help="window rows for the cost, comma-separated")
    ap.add_argument("--repeats", type=int, default=5, help="checks per size and setting (median)")
    ap.add_argument("--quick", action="store_true", help="20 windows, cost at 100k rows only")
    ap.add_argument("--segments-only", action="store_true", help="only the cost of 20 segments")
    ap.add_argument("--segment-rows", type=int, default=1_000_000, help="window rows for the segment cost")
    ap.add_argument("--tasks-only", action="store_true", help="only multiclass CBPE and regression DLE")
    args = ap.parse_args()
    if args.quick:
        args.windows, args.sizes = 20, "100000"
    if args.tasks_only:
        import bench_estimation_tasks
        bench_estimation_tasks.report(args.windows, args.window, [int(s) for s in args.sizes.split(",")], args.repeats)
        return
    from monitor.config import load_config
    from monitor.drift.estimation import fit_calibrator
    home = Path(tempfile.mkdtemp(prefix="bench-estimation-"))
    cfg = load_config(path=None, environ={}, overrides={"home": str(home)})
    t0 = time.perf_counter()
    model = train(cfg)
    ref = scored(model, 5000, 50).drop(columns=["prediction"])
    calibrator = fit_calibrator(ref["label"].to_numpy(), ref["score"].to_numpy())
    if args.segments_only:
        _print_segment_cost(cfg, model, args)
        return
    print(f"driftloop estimation benchmark: MLP trained in {time.perf_counter() - t0:.1f} s; reference 5,000 "
          f"held-out rows; {args.windows} windows of {args.window:,} rows per scenario\n")
    print("| scenario | realised accuracy | estimated | abs error median | abs error p90 | inside the band |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, real, est, med, p90, inside in errors(model, calibrator, args.windows, args.window):
        print(f"| {name} | {real:.4f} | {est:.4f} | {med:.4f} | {p90:.4f} | {inside:.0%} |")
    print("\n(medians over windows; the band is drift.confidence = 0.95. Concept shifts change the labels, not "
          "the scores: the estimate cannot see them.)\n")
    print("| window rows | check without estimation | with | ratio | estimation alone | its share of the check "
          f"| {len(SEGMENTS)} segments alone | their share |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, without, with_, alone, seg in cost(cfg, model, ref, [int(s) for s in args.sizes.split(",")], args.repeats):
        print(f"| {n:,} | {without:.3f} s | {with_:.3f} s | {with_ / without:.3f} | {alone:.3f} s | "
              f"{alone / without:.1%} | {seg:.3f} s | {seg / without:.1%} |")
    print(f"\ntimes: median of {args.repeats} checks with the reference cached (DriftEvaluator); "
          f"load average at the end {os.getloadavg()[0]:.1f} (other work on the machine slows both)")
    _print_segment_cost(cfg, model, args)
    import bench_estimation_tasks
    print()
    bench_estimation_tasks.report(args.windows, args.window, [int(s) for s in args.sizes.split(",")], args.repeats)


def _print_segment_cost(cfg, model, args) -> None:
    without, with_, alone, share = segment_cost(cfg, model, args.segment_rows, args.repeats)
    print(f"\n| window rows | check, no segments | with {len(SEGMENTS) + EXTRA_SEGMENTS} segments | difference "
          "| segments alone | their share of the check |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(f"| {args.segment_rows:,} | {without:.3f} s | {with_:.3f} s | {with_ - without:+.3f} s | {alone:.3f} s "
          f"| {share:.1%} |")
    print(f"\n(the same window and schema: {len(cfg.model.features) + EXTRA_SEGMENTS} features, "
          f"{EXTRA_SEGMENTS + 2} of them categorical; CPU seconds, median of {args.repeats}; load average "
          f"{os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
