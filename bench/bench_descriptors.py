"""Benchmark: what ``drift.descriptors`` adds to a check (monitor/drift/descriptors.py).

For text (the text example's support messages, one file each) and for images (64 x 64 PNG files,
colour), a reference of ``--rows`` inputs and windows of ``--rows`` inputs, all files inside
``model.input_roots``. Measured with the daemon's evaluator (:class:`monitor.drift.DriftEvaluator`,
the reference prepared once per champion and cached):

* **reference**: preparing the reference with descriptors minus without (once per champion);
* **check, cold**: a check whose window's files were never read (every file read and measured);
* **check, moved**: the next window, 10 % new rows (what a running daemon sees: the cache serves the rest);
* **check, warm**: the same window again (all from the cache);

each minus the same check with descriptors off, and the descriptors' own seconds from the report.

    .venv/bin/python bench/bench_descriptors.py                 # 5,000 files per side (~1 min)
    .venv/bin/python bench/bench_descriptors.py --rows 1000
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from examples.text.corpus import corpus  # noqa: E402
from monitor.config import load_config  # noqa: E402
from monitor.drift import DriftEvaluator  # noqa: E402


def text_files(folder: Path, n: int, seed: int) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, text in enumerate(corpus(n, seed=seed)["text"]):
        path = folder / f"{seed}-{i}.txt"
        path.write_text(text)
        out.append(str(path))
    return out


def image_files(folder: Path, n: int, seed: int) -> list[str]:
    from PIL import Image
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        pixels = (rng.uniform(0.3, 0.7) * 255 + rng.normal(0, 40, size=(64, 64, 3))).clip(0, 255).astype(np.uint8)
        path = folder / f"{seed}-{i}.png"
        Image.fromarray(pixels, mode="RGB").save(path)
        out.append(str(path))
    return out


def frame(uris: list[str], seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = len(uris)
    return pd.DataFrame({"x": rng.normal(size=n), "score": rng.uniform(size=n), "label": rng.integers(0, 2, n),
                         "input_uri": uris})


def timed(evaluate: DriftEvaluator, reference: pd.DataFrame, window: pd.DataFrame, cfg) -> tuple[float, object]:
    started = time.perf_counter()
    result = evaluate(reference, window, cfg.model, cfg.drift, {})
    return time.perf_counter() - started, result


def bench(kind: str, root: Path, rows: int, repeats: int) -> dict[str, float]:
    files = text_files if kind == "text" else image_files
    reference = frame(files(root / "ref", rows, 1), 1)
    windows = [frame(files(root / f"w{r}", rows, 10 + r), 2) for r in range(repeats)]
    moved = [pd.concat([w.iloc[rows // 10:], frame(files(root / f"m{r}", rows // 10, 50 + r), 3)],
                       ignore_index=True) for r, w in enumerate(windows)]
    drift: dict[str, Any] = {"min_labels": 1000, "window_size": rows}
    overrides = {"model": {"features": [{"name": "x"}], "input_roots": [str(root)]}, "drift": drift}
    off = load_config(path=None, environ={}, overrides=overrides)
    on = load_config(path=None, environ={}, overrides={
        **overrides, "drift": {**drift, "descriptors": {kind: "input_uri"}}})
    out: dict[str, list[float]] = {k: [] for k in ("reference", "cold", "moved", "warm", "own_cold", "own_moved",
                                                   "own_warm", "plain")}
    for r in range(repeats):
        plain = DriftEvaluator()
        timed(plain, reference, windows[r], off)  # prepares the reference, warms Evidently
        started = time.perf_counter()
        DriftEvaluator().prepared(reference, off.model, off.drift)
        base_reference = time.perf_counter() - started
        base = statistics.median(timed(plain, reference, windows[r], off)[0] for _ in range(2))
        evaluate = DriftEvaluator()
        started = time.perf_counter()
        evaluate.prepared(reference, on.model, on.drift)
        out["reference"].append(time.perf_counter() - started - base_reference)
        for name, window in (("cold", windows[r]), ("moved", moved[r]), ("warm", moved[r])):
            seconds, result = timed(evaluate, reference, window, on)
            out[name].append(seconds - base)
            out[f"own_{name}"].append(result.descriptors.seconds)  # type: ignore[attr-defined]
        out["plain"].append(base)
    return {k: statistics.median(v) for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    print(f"{'kind':<6} {'rows':>6} {'check alone':>12} {'reference +':>12} {'cold +':>9} {'moved +':>9} "
          f"{'warm +':>9}   (descriptors' own seconds: cold / moved / warm)")
    for kind in ("text", "image"):
        with tempfile.TemporaryDirectory() as folder:
            got = bench(kind, Path(folder), args.rows, args.repeats)
        print(f"{kind:<6} {args.rows:>6} {got['plain']:>11.2f}s {got['reference']:>11.2f}s {got['cold']:>8.2f}s "
              f"{got['moved']:>8.2f}s {got['warm']:>8.2f}s   ({got['own_cold']:.2f} / {got['own_moved']:.2f} / "
              f"{got['own_warm']:.2f} s)")


if __name__ == "__main__":
    main()
