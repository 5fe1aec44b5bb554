"""Benchmark: which embedding-drift test, by measurement (issue 21 item 2).

Four candidates (monitor/drift/embedding_methods.py), each run exactly as the drift check runs it
(monitor/drift/embedding.py: a row cap per side, a PCA projection fitted on one part of the
reference, the test against the other part):

  mmd             RBF-kernel MMD² (median heuristic) with a 200-permutation test, p < 0.05
  classifier      Evidently's default: logistic domain classifier, ROC AUC on held-out rows >= 0.55
  components      K-S per PCA component, Benjamini-Hochberg, smallest adjusted p < 0.05
  reconstruction  NannyML's: mean PCA reconstruction error (65 % variance) outside +-3 SE of the reference's

Data:

* **digits** — a small CNN (two conv layers, a 64-unit penultimate layer) trained on CPU in a few
  seconds on 497 of sklearn's bundled 8x8 ``load_digits`` images; the embedding is its 64-d
  penultimate layer. Each check draws a fresh partition of the other 1,300 images: 800 reference
  rows and a 500-row window (disjoint images, so "unchanged" checks are two samples of one
  distribution). Shifts apply to the window's images: rotation by 5/10/15/30 degrees
  (``scipy.ndimage.rotate``), gaussian pixel noise (sd 2 on 0-16 pixels), and a prior shift (class 3
  at 20 % of a 400-row window instead of 10 %).
* **synthetic 768-d** — rows ``x = W z + noise`` (32 latent gaussian factors, noise sd 0.5 per
  dimension; what a sentence encoder's vectors look like to a linear method), reference 4,000 rows,
  windows of 500 and 2,000 rows: unchanged; latent mean shift (+0.25 sd on one factor); latent
  covariance change (sd x1.3 on 4 factors); a shift of norm 2 along a random direction (mostly off the
  latent subspace).
* **cost** — 100,000 x 768 float32 per side: preparing the reference (sample + PCA fit) and one
  check, each method, median of ``--repeats``; peak traced memory; and Evidently's default
  (``ModelDriftMethod`` on all rows, no cap) as the baseline.

    .venv/bin/python bench/bench_embedding_drift.py                 # everything (~10 min on 2 shared cores)
    .venv/bin/python bench/bench_embedding_drift.py --checks 20     # fewer checks per case
    .venv/bin/python bench/bench_embedding_drift.py --skip-cost     # quality only
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from monitor.drift.embedding import prepare_block, check_block  # noqa: E402
from monitor.drift.embedding_methods import METHODS  # noqa: E402


# ---------------------------------------------------------------- digits and the CNN

def _digits():
    from sklearn.datasets import load_digits
    d = load_digits()
    return d.images.astype(np.float32), d.target.astype(np.int64)


def train_cnn(images: np.ndarray, labels: np.ndarray, seed: int = 0):
    import torch
    from torch import nn
    torch.manual_seed(seed)
    torch.set_num_threads(1)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1),
                                          nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 16, 64), nn.ReLU())
            self.head = nn.Linear(64, 10)

        def forward(self, x):
            return self.head(self.features(x))

    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    x = torch.from_numpy(images[:, None] / 16.0)
    y = torch.from_numpy(labels)
    for _ in range(30):
        perm = torch.randperm(len(x))
        for i in range(0, len(x), 64):
            b = perm[i:i + 64]
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(net(x[b]), y[b]).backward()
            opt.step()
    net.eval()

    def embed(imgs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with torch.no_grad():
            t = torch.from_numpy(imgs[:, None].astype(np.float32) / 16.0)
            e = net.features(t)
            return e.numpy().astype(np.float32), net.head(e).argmax(1).numpy()
    return embed


def rotate(images: np.ndarray, degrees: float) -> np.ndarray:
    from scipy.ndimage import rotate as rot
    return np.stack([rot(im, degrees, reshape=False, order=1, mode="constant", cval=0.0) for im in images])


def digits_cases(seed: int = 0):
    """(embeddings of the non-training images unchanged, {shift: embeddings}, labels, accuracy per case)."""
    images, labels = _digits()
    perm = np.random.default_rng(seed).permutation(len(images))
    train, rest = perm[:497], perm[497:]
    started = time.perf_counter()
    embed = train_cnn(images[train], labels[train], seed)
    trained = time.perf_counter() - started
    base, pred = embed(images[rest])
    accuracy = {"unchanged": float((pred == labels[rest]).mean())}
    shifted = {}
    for deg in (5, 10, 15, 30):
        shifted[f"rotate {deg} deg"], p = embed(rotate(images[rest], deg))
        accuracy[f"rotate {deg} deg"] = float((p == labels[rest]).mean())
    noisy = np.clip(images[rest] + np.random.default_rng(seed + 1).normal(0, 2.0, images[rest].shape), 0, 16)
    shifted["noise sd 2"], p = embed(noisy.astype(np.float32))
    accuracy["noise sd 2"] = float((p == labels[rest]).mean())
    return base, shifted, labels[rest], accuracy, trained


def digits_windows(n_rows: int, labels: np.ndarray, rng: np.random.Generator, prior: bool):
    """One partition: 800 reference positions, the window's positions (500, or the prior shift's 400)."""
    perm = rng.permutation(n_rows)
    ref, pool = perm[:800], perm[800:]
    if not prior:
        return ref, pool[:500]
    threes = pool[labels[pool] == 3]
    others = pool[labels[pool] != 3]
    k = min(len(threes), 80)
    return ref, np.r_[threes[:k], others[: 4 * k]]


# ---------------------------------------------------------------- synthetic 768-d

D, LATENT = 768, 32


def synthetic(n: int, rng: np.random.Generator, loading: np.ndarray, shift: str = "none") -> np.ndarray:
    z = rng.normal(size=(n, LATENT))
    if shift == "latent mean +0.25 sd":
        z[:, 0] += 0.25
    elif shift == "latent sd x1.3 (4 factors)":
        z[:, :4] *= 1.3
    x = z @ loading.T + 0.5 * rng.normal(size=(n, D))
    if shift == "off-subspace shift, norm 2":
        direction = np.random.default_rng(99).normal(size=D)
        x += 2.0 * direction / np.linalg.norm(direction)
    return x.astype(np.float32)


SYNTHETIC_SHIFTS = ("latent mean +0.25 sd", "latent sd x1.3 (4 factors)", "off-subspace shift, norm 2")


# ---------------------------------------------------------------- running the methods

def _checks(cases: list[str], checks: int, draw, cap: int, components: int) -> dict[str,
                                                                                    dict[str, tuple[float, float]]]:
    """Per case and method: the share of ``checks`` flagged and the median seconds of one test.
    ``draw(case, i)`` gives check i's (reference block, window block); the reference is prepared
    once per check and every method tests the same pair."""
    rows: dict[str, dict[str, tuple[float, float]]] = {c: {} for c in cases}
    for case in cases:
        flags: dict[str, list[bool]] = {m: [] for m in METHODS}
        secs: dict[str, list[float]] = {m: [] for m in METHODS}
        for i in range(checks):
            ref_block, cur_block = draw(case, i)
            prepared = prepare_block(ref_block, sample_rows=cap, components=components, seed=i)
            assert not isinstance(prepared, str), prepared
            for method in METHODS:
                r = check_block("e", prepared, cur_block, method=method, threshold=None, sample_rows=cap, seed=i)
                assert not isinstance(r, str), r
                flags[method].append(r.drifted)
                secs[method].append(r.seconds)
        rows[case] = {m: (float(np.mean(flags[m])), statistics.median(secs[m])) for m in METHODS}
    return rows


def quality(checks: int, cap: int, components: int) -> None:
    base, shifted, labels, accuracy, trained = digits_cases()
    print(f"\n## digits: CNN trained in {trained:.1f} s; accuracy on the 1,300 other images: "
          + ", ".join(f"{k} {v:.3f}" for k, v in accuracy.items()))
    print(f"embedding dim {base.shape[1]}, reference 800 rows, window 500 rows (prior shift 400), "
          f"cap {cap}, components {components}, {checks} checks per case\n")
    cases = ["unchanged"] + list(shifted) + ["prior: class 3 at 20 %"]

    def draw_digits(case: str, i: int):
        rng = np.random.default_rng([1000, i])   # the same partitions for every case
        ref, cur = digits_windows(len(base), labels, rng, prior=case.startswith("prior"))
        return base[ref], (shifted[case][cur] if case in shifted else base[cur])
    _table("digits", cases, _checks(cases, checks, draw_digits, cap, components))

    print(f"\n## synthetic {D}-d ({LATENT} latent factors + noise), reference 4,000 rows, {checks} checks per case")
    loading = np.random.default_rng(7).normal(size=(D, LATENT)) * 0.15
    for n in (500, 2000):
        cases = ["unchanged"] + list(SYNTHETIC_SHIFTS)

        def draw_synthetic(case: str, i: int, n: int = n):
            rng = np.random.default_rng([2000, n, i])
            return synthetic(4000, rng, loading), synthetic(n, rng, loading, "none" if case == "unchanged" else case)
        _table(f"synthetic, window {n} rows", cases, _checks(cases, checks, draw_synthetic, cap, components))


def _table(title: str, cases: list[str], rows: dict[str, dict[str, tuple[float, float]]]) -> None:
    print(f"| {title}: flagged share (median s/check) | " + " | ".join(METHODS) + " |")
    print("|---|" + "---:|" * len(METHODS))
    for case in cases:
        print(f"| {case} | " + " | ".join(f"{rows[case][m][0]:.2f} ({rows[case][m][1]:.2f} s)" for m in METHODS)
              + " |")


# ---------------------------------------------------------------- cost at 100k x 768

def cost(repeats: int, cap: int, components: int, evidently: bool) -> None:
    rng = np.random.default_rng(5)
    loading = np.random.default_rng(7).normal(size=(D, LATENT)) * 0.15
    n = 100_000
    ref = np.vstack([synthetic(10_000, rng, loading) for _ in range(n // 10_000)])
    cur = np.vstack([synthetic(10_000, rng, loading, SYNTHETIC_SHIFTS[0]) for _ in range(n // 10_000)])
    print(f"\n## cost at {n:,} x {D} float32 per side ({ref.nbytes / 1e6:.0f} MB each), cap {cap} rows per side, "
          f"{components} components; median of {repeats}")
    print("| method | prepare reference (once per champion) | check | peak traced memory | verdict |")
    print("|---|---:|---:|---:|---|")
    for method in METHODS:
        prep_s, check_s, peaks = [], [], []
        verdict = None
        for i in range(repeats):
            tracemalloc.start()
            t0 = time.perf_counter()
            prepared = prepare_block(ref, sample_rows=cap, components=components, seed=i)
            t1 = time.perf_counter()
            assert not isinstance(prepared, str)
            out = check_block("e", prepared, cur, method=method, threshold=None, sample_rows=cap, seed=i)
            t2 = time.perf_counter()
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
            assert not isinstance(out, str)
            prep_s.append(t1 - t0)
            check_s.append(t2 - t1)
            verdict = out.drifted
        print(f"| {method} | {statistics.median(prep_s):.2f} s | {statistics.median(check_s):.2f} s | "
              f"{statistics.median(peaks) / 1e6:.0f} MB | {'drift' if verdict else 'no drift'} |")
    if evidently:
        import pandas as pd
        from evidently.legacy.metrics.data_drift.embedding_drift_methods import model
        cols = [f"e{i}" for i in range(D)]
        t0 = time.perf_counter()
        score, flagged, _ = model()(pd.DataFrame(cur, columns=cols), pd.DataFrame(ref, columns=cols))
        t1 = time.perf_counter()
        print(f"| Evidently's default (ModelDriftMethod, SGD, all {n:,} rows, no cap) | - | {t1 - t0:.2f} s | "
              f"(frames: {2 * n * D * 8 / 1e6:.0f} MB float64) | {'drift' if flagged else 'no drift'} "
              f"(AUC {score:.3f}) |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checks", type=int, default=40, help="checks per case (false alarms: >= 40)")
    ap.add_argument("--cap", type=int, default=2000, help="drift.embedding_sample_rows")
    ap.add_argument("--components", type=int, default=32, help="drift.embedding_components")
    ap.add_argument("--repeats", type=int, default=3, help="repeats of the cost measurement (median)")
    ap.add_argument("--skip-cost", action="store_true")
    ap.add_argument("--skip-quality", action="store_true")
    ap.add_argument("--no-evidently", action="store_true", help="leave out Evidently's uncapped baseline")
    args = ap.parse_args()
    if not args.skip_quality:
        quality(args.checks, args.cap, args.components)
    if not args.skip_cost:
        cost(args.repeats, args.cap, args.components, not args.no_evidently)


if __name__ == "__main__":
    main()
