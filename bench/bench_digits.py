"""Benchmark: the digits loop (issue 21) through a real ``driftloop serve``: a CNN of the user's
(examples/digits/model.py, ``training.entrypoint``) on image files, the service sending class
probabilities, the ``image_emb`` embedding and ``input_uri``, labels one batch late.

    .venv/bin/python bench/bench_digits.py                    # 6 batches of 250 digits, then 18 rotated
    .venv/bin/python bench/bench_digits.py --quick            # the end-to-end test's plan (3 + 7 batches)
    .venv/bin/python bench/bench_digits.py --drift noise      # noisier digits instead (thick: broader strokes)

The harness is examples/digits/loop.py's: the bundled digits written as image files, the baseline
trained on the ``train`` split (jittered as live traffic is), the daemon a child process started
as in production (``python -m monitor.cli serve``), the model service
(examples/digits/service.py) in a thread scoring with ``@champion``, and examples/stream.py
sending each batch through the service and waiting for the daemon's next judged check (figures
in rows, not seconds: a retrain on 2 cores takes longer than a batch).

Printed: incidents opened before the drift, labelled rows from the onset to the first incident,
incidents and promotions, served accuracy before the drift and over the last 20 % of batches.
Goals (issue 21): 0 incidents before; first incident within 500 labelled rows of the onset;
<= 2 promotions; last-20 % served accuracy within 2 points of the pre-drift level.

Caveat, printed with the figures: the stream draws from 719 images, so after a retrain on
rotated rows the traffic holds near-copies (other jitter) of rows it was fine-tuned on.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import bench_loop  # noqa: E402

from examples.digits.data import DRIFTS, write_digits  # noqa: E402
from examples.digits.loop import DigitsPlan, run_loop, summary, train_baseline, write_config  # noqa: E402


def run(plan: DigitsPlan, workdir: Path, echo=print) -> dict:
    import httpx

    from monitor.config import load_config
    home = workdir / f"digits-{plan.drift}"
    port = bench_loop.free_port()
    config = write_config(home, port, plan)
    cfg = load_config(config, environ={})
    index = write_digits(home / "digits", seed=plan.seed)
    base = train_baseline(cfg, home / "digits", index, plan.seed)
    echo(f"baseline v{base.version}: held-out accuracy {base.metrics['accuracy']:.3f}")
    daemon = bench_loop.Daemon(config, port, home / "serve.log")
    try:
        with httpx.Client(timeout=10) as http:
            daemon.wait_ready(http, timeout=120)
        result = run_loop(cfg, plan, daemon.url, home / "digits", index, echo=echo)
    finally:
        daemon.stop()
    figures = summary(result)
    figures["baseline_accuracy"] = base.metrics["accuracy"]
    figures["retrains"] = [{k: a.get(k) for k in ("status", "rows", "challenger_version", "duration_seconds")}
                           for a in result.retrains]
    figures["errors"] = "Traceback" in (home / "serve.log").read_text(errors="replace")
    return figures


def report(f: dict, plan: DigitsPlan) -> None:
    goals = [("incidents before the drift", f["incidents_before_onset"], f["incidents_before_onset"] == 0, "0"),
             ("labelled rows onset -> first incident", f["detection_rows"],
              f["detection_rows"] is not None and f["detection_rows"] <= 500, "<= 500"),
             ("promotions", f["promotions"], f["promotions"] <= 2 and f["promotions"] >= 1, "1..2"),
             ("served accuracy, last 20 % - pre-drift", round(f["last20"] - f["pre"], 4),
              f["last20"] >= f["pre"] - 0.02, ">= -0.02")]
    print(f"\ndigits loop: {plan.before} x {plan.batch} digits, then {plan.after} x {plan.batch} {plan.drift}; "
          f"{f['seconds']:.0f} s; baseline held-out accuracy {f['baseline_accuracy']:.3f}")
    print(f"served accuracy before the drift {f['pre']:.3f}, over the last 20 % {f['last20']:.3f}; "
          f"incidents {f['incidents']}; retrains {f['retrains']}")
    for name, value, met, goal in goals:
        print(f"  {name:<40} {str(value):>8}   goal {goal:<9} {'met' if met else 'MISSED'}")
    if f["errors"]:
        print("  ERRORS: a traceback in serve.log")
    print("Caveat: the stream draws from 719 images; after a retrain the traffic holds near-copies of rows it "
          "was fine-tuned on, so the recovered level is optimistic for unseen writers.")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the end-to-end test's plan (DigitsPlan.fast)")
    ap.add_argument("--batch", type=int, help="digits per batch")
    ap.add_argument("--before", type=int, help="batches before the drift")
    ap.add_argument("--after", type=int, help="batches after it")
    ap.add_argument("--drift", choices=DRIFTS, default="rotate")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--keep", type=Path, help="keep the home (store, MLflow, serve.log, images) under this folder")
    args = ap.parse_args()
    plan = DigitsPlan.fast() if args.quick else DigitsPlan()
    given = {k: getattr(args, k) for k in ("batch", "before", "after", "seed") if getattr(args, k) is not None}
    plan = replace(plan, drift=args.drift, **given)
    workdir = Path(tempfile.mkdtemp(prefix="bench-digits-")) if args.keep is None else args.keep
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        figures = run(plan, workdir)
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    report(figures, plan)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
