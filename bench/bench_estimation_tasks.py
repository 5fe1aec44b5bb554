"""Benchmark (part 4 of bench_estimation.py): performance estimated before labels for multiclass
(CBPE) and regression (direct loss estimation) models, against the realised figures.

Data and models: tests.support.estimation_data (6 classes, or a regression target whose noise
depends on the inputs; the trainer's MLP each, trained as ``driftloop train`` trains it on 8,000
rows; the reference is 5,000 held-out rows saved by the trainer's ``reference_sample``). Per scenario, ``windows``
windows of ``rows`` rows: the error of the estimate against the realised figure of the same rows and how
often the realised figure is inside the band (``drift.confidence`` 0.95). Covariate shifts keep
``P(y | x)``; the last scenario of each task changes it (the estimate is blind to that).

Cost: per window size, the check with and without estimation and the estimation alone (CPU
seconds, ``time.process_time``, median of ``repeats``), and the fit per champion.

    .venv/bin/python bench/bench_estimation.py --tasks-only [--quick]
"""
from __future__ import annotations

import os
import statistics
import time

import numpy as np

MC_SCENARIOS = (("stationary", {}), ("covariate 0.5", {"shift": 0.5}), ("covariate 1.0", {"shift": 1.0}),
                ("covariate 2.0", {"shift": 2.0}), ("concept 0.5 (blind)", {"concept": 0.5}))
RG_SCENARIOS = (("stationary", {}), ("covariate 0.5", {"shift": 0.5}), ("covariate 1.0", {"shift": 1.0}),
                ("covariate 2.0", {"shift": 2.0}), ("noise x1.5 (blind)", {"noise": 1.5}))


def _setup():
    """The two configurations, models and references."""
    import tempfile
    from pathlib import Path

    from tests.support.estimation_data import config, multiclass_data, reference, regression_data, trained
    home = Path(tempfile.mkdtemp(prefix="bench-estimation-tasks-"))
    mc, rg = config("multiclass", home), config("regression", home)
    mc_model, rg_model = trained(mc, multiclass_data(8000, seed=0)), trained(rg, regression_data(8000, seed=0))
    return (mc.model, mc_model, reference(mc, mc_model, multiclass_data(5000, seed=50)),
            rg.model, rg_model, reference(rg, rg_model, regression_data(5000, seed=50)))


def _fit(cfg, reference):
    from monitor.drift.estimators import fit_estimator
    from monitor.drift.frames import labelled_rows
    t0 = time.process_time()
    est = fit_estimator(cfg, reference, labelled_rows(reference, cfg, "reference"))
    return est, time.process_time() - t0


def _mc_estimate(cal, w):
    from monitor.drift.estimation import estimate_multiclass
    from monitor.tasks import internal_proba_columns
    from tests.support.estimation_data import K
    return estimate_multiclass(cal, w[internal_proba_columns(K)].to_numpy(), w["prediction"].to_numpy(dtype=np.int64),
                               w["score"].to_numpy())


def multiclass_errors(model, cal, windows: int, rows: int) -> list[tuple]:
    from monitor.taskstats import multiclass_performance
    from monitor.tasks import internal_proba_columns
    from tests.support.estimation_data import K, multiclass_data, scored_multiclass
    out = []
    for name, knobs in MC_SCENARIOS:
        real_acc, est_acc, acc_err, inside, f1_err, auc_err, auc_inside = [], [], [], 0, [], [], 0
        for i in range(windows):
            w = scored_multiclass(model, multiclass_data(rows, seed=10_000 + i, **knobs))
            e = _mc_estimate(cal, w)
            y, pred = w["label"].to_numpy(dtype=np.int64), w["prediction"].to_numpy(dtype=np.int64)
            real = multiclass_performance(y, pred, w[internal_proba_columns(K)].to_numpy(), K)
            real_acc.append(real.accuracy)
            est_acc.append(e.accuracy)
            acc_err.append(abs(real.accuracy - e.accuracy))
            inside += e.accuracy_ci[0] <= real.accuracy <= e.accuracy_ci[1]
            f1_err.append(abs(real.macro_f1 - e.macro_f1))
            auc_err.append(abs(real.roc_auc - e.roc_auc))
            auc_inside += e.roc_auc_ci[0] <= real.roc_auc <= e.roc_auc_ci[1]
        out.append((name, statistics.median(real_acc), statistics.median(est_acc), statistics.median(acc_err),
                    float(np.quantile(acc_err, 0.9)), inside / windows, statistics.median(f1_err),
                    statistics.median(auc_err), auc_inside / windows))
    return out


def regression_errors(model, est, windows: int, rows: int) -> list[tuple]:
    from monitor.drift.loss_estimation import estimate_loss
    from tests.support.estimation_data import regression_data, scored_regression
    out = []
    for name, knobs in RG_SCENARIOS:
        real_mae, est_mae, rel, inside, rmse_rel, rmse_inside = [], [], [], 0, [], 0
        for i in range(windows):
            w = scored_regression(model, regression_data(rows, seed=10_000 + i, **knobs))
            e = estimate_loss(est, w)
            err = (w["prediction"] - w["label"]).to_numpy()
            mae, rmse = float(np.abs(err).mean()), float(np.sqrt((err * err).mean()))
            real_mae.append(mae)
            est_mae.append(e.mae)
            rel.append(abs(e.mae - mae) / mae)
            inside += e.mae_ci[0] <= mae <= e.mae_ci[1]
            rmse_rel.append(abs(e.rmse - rmse) / rmse)
            rmse_inside += e.rmse_ci[0] <= rmse <= e.rmse_ci[1]
        out.append((name, statistics.median(real_mae), statistics.median(est_mae), statistics.median(rel),
                    float(np.quantile(rel, 0.9)), inside / windows, statistics.median(rmse_rel), rmse_inside / windows))
    return out


def cost(mc_cfg, mc_model, mc_ref, mc_cal, rg_cfg, rg_model, rg_ref, rg_est, sizes: list[int],
         repeats: int) -> list[tuple]:
    """Per window size and task: the CPU seconds of the check (``DriftEvaluator``, reference cached)
    without and with ``drift.estimate``, alternating, and of the estimation alone (multiclass: read
    as ``monitor.drift.check_figures.estimated_figures`` does, then estimate; regression:
    ``estimate_loss`` on the frame). Half of each window is labelled."""
    from monitor.config import load_config
    from monitor.drift import DriftEvaluator
    from monitor.drift.estimation import estimate_multiclass
    from monitor.drift.frames import scored_rows
    from monitor.drift.loss_estimation import estimate_loss
    from tests.support.estimation_data import multiclass_data, regression_data, scored_multiclass, scored_regression
    drift_on = load_config(path=None, environ={}, overrides={"home": "unused"}).drift
    drift_off = drift_on.model_copy(update={"estimate": False})
    out = []
    for n in sizes:
        windows = {"multiclass": scored_multiclass(mc_model, multiclass_data(n, seed=99, shift=0.5), labelled=0.5),
                   "regression": scored_regression(rg_model, regression_data(n, seed=99, shift=0.5), labelled=0.5)}
        for task, cfg, ref in (("multiclass", mc_cfg, mc_ref), ("regression", rg_cfg, rg_ref)):
            w = windows[task]
            ev = DriftEvaluator()
            ev(ref, w, cfg, drift_on, {}, reference_key="v")   # warm-up: the reference is prepared
            times: dict[str, list[float]] = {"without": [], "with": [], "alone": []}
            for _ in range(repeats):
                for label, drift in (("without", drift_off), ("with", drift_on)):
                    t0 = time.process_time()
                    ev(ref, w, cfg, drift, {}, reference_key="v")
                    times[label].append(time.process_time() - t0)
                t0 = time.process_time()
                if task == "multiclass":
                    rows = scored_rows(w, cfg, "current window")
                    estimate_multiclass(mc_cal, rows.proba, rows.pred, rows.score)
                else:
                    estimate_loss(rg_est, w)
                times["alone"].append(time.process_time() - t0)
            out.append((n, task, *(statistics.median(times[k]) for k in ("without", "with", "alone"))))
    return out


def report(windows: int, rows: int, sizes: list[int], repeats: int) -> None:
    t0 = time.perf_counter()
    mc_cfg, mc_model, mc_ref, rg_cfg, rg_model, rg_ref = _setup()
    mc_cal, mc_fit = _fit(mc_cfg, mc_ref)
    rg_est, rg_fit = _fit(rg_cfg, rg_ref)
    print("multiclass and regression estimation: two models trained (trainer) and referenced in "
          f"{time.perf_counter() - t0:.1f} s; references "
          f"5,000 held-out rows; {windows} windows of {rows:,} rows per scenario\n")
    print("Multiclass CBPE (6 classes)\n")
    print("| scenario | realised accuracy | estimated | abs error median | abs error p90 | inside the band "
          "| macro F1 abs error median | macro ROC AUC abs error median | AUC inside its band |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, real, est, med, p90, inside, f1, auc, auc_in in multiclass_errors(mc_model, mc_cal, windows, rows):
        print(f"| {name} | {real:.4f} | {est:.4f} | {med:.4f} | {p90:.4f} | {inside:.0%} | {f1:.4f} | {auc:.4f} "
              f"| {auc_in:.0%} |")
    print("\nRegression DLE\n")
    print("| scenario | realised MAE | estimated | relative error median | p90 | inside the band "
          "| RMSE relative error median | RMSE inside its band |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, real, est, med, p90, inside, rmse_med, rmse_in in regression_errors(rg_model, rg_est, windows, rows):
        print(f"| {name} | {real:.3f} | {est:.3f} | {med:.1%} | {p90:.1%} | {inside:.0%} | {rmse_med:.1%} "
              f"| {rmse_in:.0%} |")
    print(f"\nFit per champion (CPU seconds, 5,000 reference rows): multiclass calibrators {mc_fit:.3f} s, "
          f"DLE loss models {rg_fit:.3f} s\n")
    print("| window rows | task | check without estimation | with | estimation alone | its share of the check |")
    print("|---:|---|---:|---:|---:|---:|")
    for n, task, without, with_, alone in cost(mc_cfg, mc_model, mc_ref, mc_cal, rg_cfg, rg_model, rg_ref, rg_est,
                                               sizes, repeats):
        print(f"| {n:,} | {task} | {without:.3f} s | {with_:.3f} s | {alone:.3f} s | {alone / without:.1%} |")
    print(f"\n(CPU seconds, time.process_time, median of {repeats}; half of each window labelled; load average "
          f"{os.getloadavg()[0]:.1f})")
