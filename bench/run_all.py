"""Run every benchmark in turn (``make bench``); ``--quick`` scales each down to a smoke run.

Each script prints its own table with figures and ratios against a baseline measured in the
same run; this runner only sequences them so they never compete for the CPU.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = {
    "exporter": (["bench_exporter.py"], ["--quick"]),
    "ingest": (["bench_ingest.py"], ["--quick"]),
    "validation": (["bench_validation.py"], ["--repeats", "5"]),
    "trainer": (["bench_trainer.py"], ["--quick"]),
    "export": (["bench_export.py"], ["--quick"]),
    "drift": (["bench_drift.py"], ["--sizes", "10000,100000"]),
    "multivariate": (["bench_multivariate.py"], ["--quick"]),
    "constraints": (["bench_constraints.py"], ["--rows", "20000"]),
    "descriptors": (["bench_descriptors.py"], ["--rows", "1000"]),
    "estimation": (["bench_estimation.py"], ["--quick"]),
    "selection": (["bench_selection.py"], ["--rows", "20000", "200000", "--repeats", "3"]),
    "maturity": (["bench_maturity.py"], ["--rows", "20000", "200000", "--repeats", "3"]),
    "daemon": (["bench_daemon.py"], ["--repeats", "50", "--requests", "100", "--no-retrain"]),
    "dashboards": (["bench_dashboards.py"], ["--quick"]),
    "loop": (["bench_loop.py"], ["--quick", "stationary", "abrupt"]),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="scaled-down smoke runs")
    ap.add_argument("names", nargs="*", help=f"which benchmarks: {', '.join(BENCHES)} [all]")
    args = ap.parse_args()
    unknown = [n for n in args.names if n not in BENCHES]
    if unknown:
        ap.error(f"unknown benchmark(s): {', '.join(unknown)}")
    failed = []
    for name in args.names or BENCHES:
        script, quick = BENCHES[name]
        cmd = [sys.executable, str(HERE / script[0]), *(quick if args.quick else [])]
        print(f"\n=== {name}: {' '.join(cmd[1:])}", flush=True)
        t0 = time.monotonic()
        rc = subprocess.call(cmd)
        print(f"=== {name}: exit {rc} after {time.monotonic() - t0:.0f} s", flush=True)
        if rc:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
