#!/usr/bin/env python
"""Benchmark: ``driftloop train`` on a file, end to end, with the seconds each phase took.

The file is an analogue of NannyML's multiclass credit-card data (issue 37: 60,000 rows took
1,617 s on 2 cores with the defaults): ``acq_channel`` and ``app_channel`` (categorical),
``app_behavioral_score``, ``requested_credit_limit``, ``credit_bureau_score``, ``stated_income``,
``is_customer``, an ``identifier``, a ``timestamp`` (passed as ``--ignore``), a constant ``partition``,
a reference model's ``y_pred`` and ``y_pred_proba_<card>`` columns (left out by the inference) and
the target ``y_true``, one of three cards drawn from a multinomial logit of the inputs. A second
file from the same generator (another seed) is the held-out set the registered champion is scored
on, through :class:`monitor.client.Champion` as a service would score it.

Phases are the pipeline's steps (trainer/baseline_training.py), timed by wrapping them in this
process: reading the file, inferring the schema, data preparation (checks, split, model build and
tensors), the epochs, the test figures, the reference sample, MLflow (the registry's store, params,
datasets, baseline, pyfunc, notes) and the ONNX/INT8 export with its checks. What is left of the
total is imports and click. ``--busy N`` runs N CPU spinners beside it, as other jobs on a shared
machine would (the 2-core development machine is one).

    .venv/bin/python bench/bench_train_file.py                       # 60,000 rows, the defaults
    .venv/bin/python bench/bench_train_file.py --busy 1              # one core taken by another job
    .venv/bin/python bench/bench_train_file.py --threads 2 --busy 1  # torch's thread per core, as before
    .venv/bin/python bench/bench_train_file.py --rows 6000 --test-rows 2000   # seconds

``--data FILE`` trains on a file of that shape instead (NannyML's own ``mc_reference.csv``, whose id
column is ``id``, the default); the figure is then the test accuracy alone.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import multiprocessing
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere, no install needed

CARDS = np.array(["prepaid_card", "highstreet_card", "upmarket_card"])
CHANNELS = ["Partner", "Organic", "Paid Search", "Paid Social", "Referral"]
APPS = ["web", "mobile", "in-store"]


def credit_cards(n: int, seed: int = 0) -> pd.DataFrame:
    """``n`` applications like NannyML's multiclass file: inputs, the ids and times, a reference
    model's outputs and the card (``y_true``). The best model's accuracy is about 0.62."""
    rng = np.random.default_rng(seed)
    acq = rng.choice(CHANNELS, n, p=[.3, .25, .2, .15, .1])
    app = rng.choice(APPS, n, p=[.5, .35, .15])
    behavioural = rng.normal(1.0, 3.0, n).round(3)
    limit = rng.choice([350, 500, 650, 800, 1000, 1500, 2000, 3000, 5000], n)
    bureau = rng.integers(300, 800, n)
    income = np.exp(rng.normal(10.5, 0.6, n)).round(2)
    customer = rng.random(n) < 0.4
    z_bureau, z_income, z_limit = (bureau - 550) / 145, (np.log(income) - 10.5) / 0.6, (np.log(limit) - 7) / 0.8
    acq_effect = pd.Series(acq).map(dict(zip(CHANNELS, [.4, 0, -.2, -.5, .3]))).to_numpy()
    app_effect = pd.Series(app).map(dict(zip(APPS, [0, -.3, .4]))).to_numpy()
    logits = np.stack([
        -0.8 * z_bureau - 0.6 * z_income - 0.25 * behavioural + 0.3 * ~customer,
        0.2 * z_bureau + 0.2 * z_income + 0.1 * behavioural + acq_effect + 0.3 * z_limit,
        0.9 * z_bureau + 0.8 * z_income + 0.2 * behavioural + app_effect + 0.6 * z_limit * z_income + 0.5 * customer
        - 0.6], axis=1)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = (p.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    q = np.exp(logits + rng.normal(0, .5, (n, 3)))  # the reference model's outputs, as the file carries them
    q /= q.sum(axis=1, keepdims=True)
    start = pd.Timestamp("2020-05-01")
    frame = pd.DataFrame({
        "acq_channel": acq, "app_behavioral_score": behavioural, "requested_credit_limit": limit,
        "app_channel": app, "credit_bureau_score": bureau, "stated_income": income, "is_customer": customer,
        "partition": "reference", "identifier": np.arange(n) + seed * 10**6,
        "timestamp": (start + pd.to_timedelta(np.arange(n) * 530, unit="s")).astype(str)})
    for i, card in enumerate(CARDS):
        frame[f"y_pred_proba_{card}"] = q[:, i].round(4)
    frame["y_pred"] = CARDS[q.argmax(axis=1)]
    frame["y_true"] = CARDS[y]
    return frame


# (phase, module[:class], attribute): each wrapped with a timer while the command runs. The pipeline's steps
# are looked up where train_baseline calls them; the MLflow ones where they are defined.
PHASES = [
    ("read file", "trainer.data", "read_table"),
    ("infer schema", "monitor.dataschema", "infer_schema"),
    ("data prep", "trainer.baseline_training", "readable_rows"),
    ("data prep", "trainer.baseline_training", "checked_rows"),
    ("data prep", "trainer.baseline_training", "split"),
    ("data prep", "trainer.baseline_training", "build_model"),
    ("data prep", "trainer.data", "tensors"),
    ("data prep", "trainer.data", "fingerprint"),
    ("epochs", "trainer.runs", "fit_checked"),
    ("test figures", "trainer.baseline_training", "task_metrics"),
    ("reference sample", "trainer.baseline_training", "reference_sample"),
    ("MLflow", "trainer.registry", "check_reachable"),
    ("MLflow", "trainer.registry:Registry", "__init__"),
    ("MLflow", "mlflow", "log_params"),
    ("MLflow", "mlflow", "log_metrics"),
    ("MLflow", "trainer.story", "log_dataset"),
    ("MLflow", "trainer.story", "record"),
    ("MLflow", "trainer.registry", "log_baseline"),
    ("MLflow", "trainer.registry", "log_model"),
    ("MLflow", "trainer.baseline_training", "mlflow_run"),
    ("export ONNX/INT8", "trainer.baseline_training", "export_and_log"),
]


@contextlib.contextmanager
def timed_phases(seconds: dict[str, float]) -> Iterator[None]:
    """Wrap each of PHASES with a wall-clock timer adding to ``seconds[phase]``; a call inside another
    timed call (tensors inside fit_checked's caller) counts once, for the outer phase."""
    import importlib
    depth = [0]
    undo: list[Callable[[], None]] = []

    def wrap(phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        if getattr(fn, "__wrapped_phase__", False):
            return fn

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            depth[0] += 1
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    seconds[phase] += time.perf_counter() - t0
        timed.__wrapped_phase__ = True  # type: ignore[attr-defined]
        return timed

    def wrap_context(phase: str, cm: Callable[..., Any]) -> Callable[..., Any]:
        """A context manager: time its entry and exit, not the body."""
        @contextlib.contextmanager
        def timed(*args: Any, **kwargs: Any) -> Iterator[Any]:
            t0 = time.perf_counter()
            inner = cm(*args, **kwargs)
            value = inner.__enter__()
            seconds[phase] += time.perf_counter() - t0
            try:
                yield value
            except BaseException:
                t0 = time.perf_counter()
                if not inner.__exit__(*sys.exc_info()):
                    seconds[phase] += time.perf_counter() - t0
                    raise
                seconds[phase] += time.perf_counter() - t0
            else:
                t0 = time.perf_counter()
                inner.__exit__(None, None, None)
                seconds[phase] += time.perf_counter() - t0
        return timed

    for phase, where, name in PHASES:
        module_name, _, cls = where.partition(":")
        owner: Any = importlib.import_module(module_name)
        if cls:
            owner = getattr(owner, cls)
        original = getattr(owner, name)
        setattr(owner, name, wrap_context(phase, original) if name == "mlflow_run" else wrap(phase, original))
        undo.append(functools.partial(setattr, owner, name, original))
    try:
        yield
    finally:
        for u in reversed(undo):
            u()


def _spin(deadline: float) -> None:
    while time.time() < deadline:
        pass


@contextlib.contextmanager
def spinners(n: int, limit_s: float) -> Iterator[None]:
    """``n`` processes burning a core each, for at most ``limit_s`` seconds."""
    procs = [multiprocessing.Process(target=_spin, args=(time.time() + limit_s,), daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    try:
        yield
    finally:
        for p in procs:
            p.terminate()
            p.join()


def held_out_accuracy(home: Path, test: pd.DataFrame) -> tuple[float, float]:
    """The champion's accuracy on ``test`` and the seconds scoring took, as a service scores."""
    from monitor.client import Champion
    with Champion(f"sqlite:///{home / 'mlflow.db'}", "driftloop-demo", interval=0) as champion:
        t0 = time.perf_counter()
        out = champion.predict(test.drop(columns=["y_true"]))
        took = time.perf_counter() - t0
    return float((out["prediction"].to_numpy() == test["y_true"].to_numpy()).mean()), took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=60_000)
    ap.add_argument("--data", type=Path, default=None, help="train on this file instead (y_true, timestamp)")
    ap.add_argument("--test-rows", type=int, default=20_000, help="held-out rows the champion is scored on")
    ap.add_argument("--threads", type=int, default=None, help="training.threads (default: the config's)")
    ap.add_argument("--busy", type=int, default=0, help="CPU spinners running beside the command")
    ap.add_argument("--limit", type=float, default=3600, help="the spinners stop after this many seconds")
    ap.add_argument("--keep", type=Path, default=None, help="a folder for the home (default: a temporary one)")
    ap.add_argument("extra", nargs="*", help="more `driftloop train` arguments, after --")
    args = ap.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-train-file-"))
    home = work / "home"
    home.mkdir(parents=True, exist_ok=True)
    if args.data is None:
        credit_cards(args.rows, seed=0).to_csv(work / "cards.csv", index=False)
    data = args.data or work / "cards.csv"
    os.environ["DRIFTLOOP_HOME"] = str(home)
    if args.threads is not None:
        os.environ["DRIFTLOOP_TRAINING__THREADS"] = str(args.threads)
    id_column = ["--id", "identifier"] if args.data is None else []  # NannyML's file: "id", the default
    command = ["train", "--data", str(data), "--target", "y_true", *id_column, "--ignore", "timestamp", "--json",
               *args.extra]
    seconds: dict[str, float] = defaultdict(float)
    print(f"driftloop {' '.join(command)}  (busy {args.busy}, "
          f"threads {args.threads if args.threads is not None else 'config'}, {os.cpu_count()} CPUs)", flush=True)
    import io
    captured = io.StringIO()
    with spinners(args.busy, args.limit):
        t0 = time.perf_counter()
        from monitor.cli import main as cli  # imports count in the total, as they do for the command
        with timed_phases(seconds), contextlib.redirect_stdout(captured):
            rc = cli(command)
        total = time.perf_counter() - t0
    if rc != 0:
        print(captured.getvalue())
        return rc
    import json
    outcome = json.loads(captured.getvalue())
    held_out = ""
    if args.data is None:
        accuracy, scoring = held_out_accuracy(home, credit_cards(args.test_rows, seed=1))
        held_out = (f"; held-out accuracy ({args.test_rows} new rows, through Champion) {accuracy:.4f} "
                    f"(scored in {scoring:.2f} s)")
    rest = total - sum(seconds.values())
    width = max(len(p) for p, _, _ in PHASES)
    print(f"\n| phase{' ' * (width - 5)} | seconds |")
    print(f"|{'-' * (width + 2)}|---------|")
    for phase in dict.fromkeys(p for p, _, _ in PHASES):
        print(f"| {phase.ljust(width)} | {seconds[phase]:7.1f} |")
    print(f"| {'imports, CLI'.ljust(width)} | {rest:7.1f} |")
    print(f"| {'total'.ljust(width)} | {total:7.1f} |")
    m = outcome["metrics"]
    print(f"\nepochs run {m['epochs_run']:.0f} (best {m['best_epoch']:.0f}), "
          f"{seconds['epochs'] / max(m['epochs_run'], 1):.2f} s per epoch, {m['samples_per_second']:.0f} samples/s; "
          f"test accuracy {m['accuracy']:.4f}{held_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
