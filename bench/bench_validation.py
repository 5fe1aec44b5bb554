"""Validation benchmark: CPU per batch of the column-wise fast path against the record-by-record
pass (the baseline, measured in the same run on the same records), for every task.

    .venv/bin/python bench/bench_validation.py                  # 1,000 records x 20 features, 30 repeats
    .venv/bin/python bench/bench_validation.py --batch 5000 --repeats 10

Both passes build the same batch (tests/monitor/ingest/test_validation*.py hold them to that); the
server runs the fast one and falls back to the slow one only to name a problem. Before the fast
path covered multiclass and regression, their every batch took the record-by-record pass.

Printed: per task and kind (predictions, labels), the median milliseconds per batch of each pass,
the ratio slow / fast, and which path ``RecordValidator.predictions`` / ``.labels`` took.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_ingest: the same records



def _batches(task: str, n: int, features: int, categorical: int, seed: int) -> tuple[list[dict], list[dict]]:
    """The prediction records bench_ingest.py posts (10 classes for multiclass), and a label for each."""
    from bench_ingest import CLASSES, _records
    preds = _records(f"v{seed}", n, features, categorical, seed=seed, task=task)
    r = random.Random(seed)
    if task == "binary":
        values: list = [r.randint(0, 1) for _ in preds]
    elif task == "regression":
        values = [round(r.gauss(100, 15), 3) for _ in preds]
    else:
        values = [r.choice(CLASSES) for _ in preds]
    return preds, [{"id": rec["id"], "label": v} for rec, v in zip(preds, values)]


def _median_ms(fn, batches: list) -> float:
    times = []
    for batch in batches:
        t0 = time.perf_counter()
        fn(batch, 0)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--categorical", type=int, default=2)
    p.add_argument("--repeats", type=int, default=30, help="batches per pass (median reported)")
    args = p.parse_args()
    from bench_ingest import _config

    from monitor.records.validation import RecordValidator

    print(f"validation of {args.batch}-record batches x {args.features} features, median of {args.repeats}")
    print(f"{'task':<11} {'kind':<11} {'fast ms':>8} {'slow ms':>8} {'slow/fast':>9}  path taken")
    for task in ("binary", "multiclass", "regression"):
        v = RecordValidator(_config(Path(tempfile.gettempdir()), args.features, args.categorical, task=task).model)
        data = [_batches(task, args.batch, args.features, args.categorical, seed) for seed in range(args.repeats)]
        for kind, idx, fast, slow, public in (("predictions", 0, v._fast_predictions, v.slow_predictions,
                                               v.predictions),
                                              ("labels", 1, v._fast_labels, v.slow_labels, v.labels)):
            batches = [d[idx] for d in data]
            fast_ms, slow_ms = _median_ms(fast, batches), _median_ms(slow, batches)
            v.paths.clear()
            public(batches[0])
            path = ",".join(sorted(p for _, p in v.paths))
            print(f"{task:<11} {kind:<11} {fast_ms:>8.2f} {slow_ms:>8.2f} {slow_ms / fast_ms:>9.2f}  {path}")


if __name__ == "__main__":
    main()
