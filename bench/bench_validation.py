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
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CLASSES = [f"class_{i}" for i in range(10)]


def _model(task: str, features: int, categorical: int):
    from monitor.config import ModelConfig
    feats = [{"name": f"x{i}"} for i in range(features - categorical)]
    feats += [{"name": f"c{i}", "type": "categorical"} for i in range(categorical)]
    model = {"name": "bench", "features": feats, "task": task}
    if task == "multiclass":
        model["classes"] = CLASSES
    return ModelConfig.model_validate(model)


def _records(task: str, n: int, features: int, categorical: int, seed: int) -> tuple[list[dict], list[dict]]:
    r = random.Random(seed)
    cats = ["eu", "us", "apac", "latam"]
    preds, labels = [], []
    for i in range(n):
        f: dict = {f"x{j}": round(r.gauss(0, 1), 6) for j in range(features - categorical)}
        f.update({f"c{j}": cats[(i + j) % 4] for j in range(categorical)})
        rec = {"id": f"{seed}-{i}", "ts": 1_790_000_000.0 + i * 0.001, "features": f}
        if task == "binary":
            rec["score"] = round(r.random(), 6)
            label: object = r.randint(0, 1)
        elif task == "regression":
            rec["prediction"] = round(r.gauss(100, 15), 3)
            label = round(r.gauss(100, 15), 3)
        else:
            weights = [r.random() for _ in CLASSES]
            rec["probabilities"] = [w / sum(weights) for w in weights]
            label = r.choice(CLASSES)
        preds.append(rec)
        labels.append({"id": rec["id"], "label": label})
    return preds, labels


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
    from monitor.records.validation import RecordValidator

    print(f"validation of {args.batch}-record batches x {args.features} features, median of {args.repeats}")
    print(f"{'task':<11} {'kind':<11} {'fast ms':>8} {'slow ms':>8} {'slow/fast':>9}  path taken")
    for task in ("binary", "multiclass", "regression"):
        v = RecordValidator(_model(task, args.features, args.categorical))
        data = [_records(task, args.batch, args.features, args.categorical, seed) for seed in range(args.repeats)]
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
