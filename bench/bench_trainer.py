#!/usr/bin/env python
"""Trainer benchmarks. Each part prints a table and ratios against a baseline measured in the same run.

1. overhead     our loop (trainer.loop.fit: DataLoader, autocast, GradScaler, clipping, progress,
                signal handling, per-epoch evaluation and checkpoint) vs a bare PyTorch loop doing the
                same work (same model, data, epochs, optimizer, clipping, per-epoch evaluation).
                Goal: ratio <= 1.05.
2. incremental  warm-start retraining (the champion, recent rows + replay, lower LR, retrain epochs)
                vs full retraining from scratch, on concept-drifted data; time and accuracy on a large
                drifted test set. Goal: >= 99 % of full-retrain accuracy in <= 25 % of its time.
3. amp          samples/s of fp32, TF32, bf16 and fp16 autocast on a larger MLP (CUDA with --cuda;
                bf16 vs fp32 on CPU otherwise), against a bare loop doing the same math (autocast,
                GradScaler, clipping, the same optimizer) with the data already on the device: fit / bare
                is what the loop's own machinery costs. --compile adds a bf16 + torch.compile row.
                Needs only torch, numpy and pandas (no MLflow, no driftloop config):
                    python bench/bench_trainer.py --only amp --cuda

Examples:
    python bench/bench_trainer.py                      # parts 1 and 2 on CPU (about a minute)
    python bench/bench_trainer.py --quick              # scaled down (seconds)
    python bench/bench_trainer.py --only amp --cuda --amp-rows 1048576 --hidden 4096,4096,4096
    python bench/bench_trainer.py --only amp --cuda --hidden 256,128          # the small tabular size
"""
from __future__ import annotations

import argparse
import copy
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere, no install needed

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from trainer.loop import LoopConfig, evaluate, fit  # noqa: E402
from monitor.stats import accuracy  # noqa: E402
from trainer.model import MLP, TabularModel  # noqa: E402
from trainer.synthetic import NUMERIC, make_dataset  # noqa: E402

CATEGORICAL = ["region", "device"]


def build(data: pd.DataFrame, hidden: list[int], dropout: float = 0.1, seed: int = 0) -> TabularModel:
    """The default model, built without driftloop's config (part 3 runs where only torch is installed)."""
    vocab, mean, std = TabularModel.preprocessing_from(data, NUMERIC, CATEGORICAL)
    torch.manual_seed(seed)
    net = MLP(len(NUMERIC), [len(vocab[c]) + 1 for c in CATEGORICAL], hidden, dropout)
    return TabularModel(net, NUMERIC, CATEGORICAL, vocab, mean, std)


def tensors(model: TabularModel, df: pd.DataFrame):
    x_num, x_cat = model.encode(df)
    return x_num, x_cat, torch.as_tensor(df["label"].to_numpy(), dtype=torch.float32)


def split(df: pd.DataFrame, fraction: float, seed: int):
    held = df.sample(frac=fraction, random_state=seed)
    return df.drop(held.index).reset_index(drop=True), held.reset_index(drop=True)


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    print(f"\n{title}")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(str(x).ljust(w) for x, w in zip(r, widths)) + " |")


def p99(xs: list[float]) -> float:
    return float(np.percentile(xs, 99))


# ---- 1. loop overhead ---------------------------------------------------------------------------
def bare_loop(model, train, val, cfg: LoopConfig, device: torch.device) -> float:
    """nanoGPT-style: shuffle, slice, set the LR (cosine), forward, loss, backward, clip, step;
    evaluate each epoch."""
    torch.manual_seed(cfg.seed)
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    x_num, x_cat, y = train
    n = len(y)
    total, step = cfg.epochs * math.ceil(n / cfg.batch_size), 0
    started = time.perf_counter()
    for epoch in range(cfg.epochs):
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(cfg.seed + epoch))
        for i in range(0, n, cfg.batch_size):
            lr = cfg.learning_rate * (cfg.min_lr_ratio
                                      + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * step / total)))
            for group in opt.param_groups:
                group["lr"] = lr
            step += 1
            idx = perm[i:i + cfg.batch_size]
            logits = model(x_num[idx].to(device), x_cat[idx].to(device))
            loss = F.binary_cross_entropy_with_logits(logits, y[idx].to(device))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            opt.zero_grad(set_to_none=True)
        evaluate(model, val, device)
        model.train()
    return time.perf_counter() - started


def part_overhead(args) -> None:
    data = make_dataset(args.rows, seed=1)
    fit_rows, val_rows = split(data, 0.2, seed=0)
    hidden = [64, 32]
    cfg = LoopConfig(epochs=args.epochs, batch_size=64, learning_rate=2e-3, patience=args.epochs + 1,
                     progress=False, device="cpu", threads=args.threads)
    names = ["bare PyTorch loop", "trainer.loop.fit", "fit + checkpoint each epoch"]
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeats + 1):  # interleaved so load changes hit all variants alike; rep 0 warms up
            for name in names:
                model = build(fit_rows, hidden)
                train, val = tensors(model, fit_rows), tensors(model, val_rows)
                w0, c0 = time.perf_counter(), time.process_time()
                if name == "bare PyTorch loop":
                    bare_loop(model, train, val, cfg, torch.device("cpu"))
                else:
                    fit(model, train, val, cfg, checkpoint_path=Path(tmp) / "ckpt.pt" if "checkpoint" in name else None)
                if rep:
                    wall[name].append(time.perf_counter() - w0)
                    cpu[name].append(time.process_time() - c0)
    base_w, base_c = statistics.median(wall[names[0]]), statistics.median(cpu[names[0]])
    samples = cfg.epochs * len(fit_rows)
    rows = [[n, f"{statistics.median(wall[n]):.3f}", f"{p99(wall[n]):.3f}", f"{statistics.median(cpu[n]):.3f}",
             f"{samples / statistics.median(wall[n]):,.0f}", f"{statistics.median(wall[n]) / base_w:.3f}",
             f"{statistics.median(cpu[n]) / base_c:.3f}"] for n in names]
    table(f"1. Loop overhead: {len(fit_rows)} rows x {cfg.epochs} epochs, batch {cfg.batch_size}, MLP {hidden}, "
          f"CPU, {torch.get_num_threads()} thread(s), {args.repeats} interleaved runs each",
          ["loop", "median wall s", "p99 wall s", "median CPU s", "samples/s", "ratio (wall)", "ratio (CPU)"], rows)
    print("CPU time (process_time) is the steadier figure on a shared machine; wall includes checkpoint fsyncs.")


# ---- 2. incremental vs full retraining ----------------------------------------------------------
def part_incremental(args) -> None:
    try:
        from monitor.config import TrainingConfig
        t = TrainingConfig()
    except ImportError:  # pragma: no cover - only where driftloop's dependencies are missing
        sys.exit("part 'incremental' needs driftloop's config (pydantic); use --only amp elsewhere")
    base_cfg = LoopConfig.from_training(t, progress=False, device="cpu", threads=args.threads)
    inc_cfg = LoopConfig.from_training(t, progress=False, device="cpu", threads=args.threads,
                                       epochs=t.retrain_epochs or t.epochs,
                                       learning_rate=t.learning_rate * t.retrain_lr_factor)
    results: dict[str, dict[str, list[float]]] = {}
    for seed in range(args.seeds):
        reference = make_dataset(args.reference_rows, seed=100 + seed)
        recent = make_dataset(args.recent_rows, seed=200 + seed, concept_shift=1.0)
        test = make_dataset(args.test_rows, seed=300 + seed, concept_shift=1.0)
        fit_ref, val_ref = split(reference, t.validation_fraction, seed)
        champion = build(fit_ref, t.hidden, t.dropout, seed)
        fit(champion, tensors(champion, fit_ref), tensors(champion, val_ref), base_cfg)
        replay = reference.sample(n=min(len(reference), int(t.replay_ratio * len(recent))), random_state=seed)
        window = pd.concat([recent, replay], ignore_index=True)
        runs = {
            "champion, not retrained": None,
            "incremental (warm start, window + replay)": ("warm", window, inc_cfg),
            "full, from scratch on window + replay": ("cold", window, base_cfg),
            "full, from scratch on reference + window": ("cold", pd.concat([reference, recent], ignore_index=True),
                                                         base_cfg),
        }
        for name, spec in runs.items():
            r = results.setdefault(name, {"seconds": [], "accuracy": [], "epochs": []})
            if spec is None:
                model, elapsed, epochs = champion, 0.0, 0
            else:
                how, rows, cfg = spec
                fit_rows, val_rows = split(rows, t.validation_fraction, seed + 1)
                model = copy.deepcopy(champion) if how == "warm" else build(fit_rows, t.hidden, t.dropout, seed)
                started = time.perf_counter()
                res = fit(model, tensors(model, fit_rows), tensors(model, val_rows), cfg)
                elapsed, epochs = time.perf_counter() - started, res.epochs_run
            r["seconds"].append(elapsed)
            r["accuracy"].append(accuracy(test["label"], model.predict_proba(test)))
            r["epochs"].append(epochs)
    full_all, full_same = "full, from scratch on reference + window", "full, from scratch on window + replay"
    med = {name: (statistics.median(r["seconds"]), statistics.median(r["accuracy"]), statistics.median(r["epochs"]))
           for name, r in results.items()}
    rows = [[name, f"{s:.2f}", f"{e:.0f}", f"{acc:.4f}", f"{acc / med[full_all][1]:.1%}",
             f"{s / med[full_all][0]:.0%}" if s else "-", f"{acc / med[full_same][1]:.1%}",
             f"{s / med[full_same][0]:.0%}" if s else "-"] for name, (s, acc, e) in med.items()]
    table(f"2. Incremental vs full retraining: concept_shift=1.0, {args.recent_rows} recent rows, "
          f"{args.reference_rows} reference rows, test on {args.test_rows} drifted rows, median of {args.seeds} seeds",
          ["model", "train s", "epochs", "accuracy", "acc vs full(all)", "time vs full(all)",
           "acc vs full(same rows)", "time vs full(same rows)"], rows)
    print("full(all): retrain from scratch on everything (reference + window), what incremental retraining avoids;\n"
          "full(same rows): from scratch on exactly the incremental run's rows (window + replay).")


# ---- 3. AMP -------------------------------------------------------------------------------------
def bare_gpu_samples_per_second(model, train, device, dtype, batch_size: int, epochs: int,
                                grad_clip: float | None = 1.0) -> float:
    """A bare loop with the whole dataset resident on the device, doing the same math as fit (autocast,
    GradScaler, unscale + clip, AdamW, fused on CUDA as fit's): the ceiling for our loop."""
    x_num, x_cat, y = (t.to(device) for t in train)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, **({"fused": True} if device.type == "cuda" else {}))
    params = list(model.parameters())
    scaler = torch.amp.GradScaler(device.type, enabled=dtype is torch.float16)
    model.to(device).train()
    n = len(y)

    def epoch() -> None:
        perm = torch.randperm(n, device=device)
        for i in range(0, n, batch_size):
            idx = perm[i:i + batch_size]
            with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
                logits = model(x_num[idx], x_cat[idx])
            loss = F.binary_cross_entropy_with_logits(logits.float(), y[idx])
            scaler.scale(loss).backward()
            if grad_clip is not None:
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(params, grad_clip)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)

    epoch()  # warm-up: kernels, allocator
    if device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(epochs):
        epoch()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return epochs * n / (time.perf_counter() - started)


def part_amp(args) -> None:
    device = torch.device("cuda" if args.cuda else "cpu")
    if args.cuda and not torch.cuda.is_available():
        sys.exit("--cuda given but torch sees no CUDA device")
    hidden = [int(h) for h in args.hidden.split(",")]
    data = make_dataset(args.amp_rows, seed=1)
    fit_rows, val_rows = split(data, 0.02, seed=0)
    modes = [("fp32", "off", False), ("tf32", "off", True), ("bf16 autocast", "bf16", False),
             ("fp16 autocast + GradScaler", "fp16", False)] if args.cuda else [("fp32", "off", False),
                                                                               ("bf16 autocast", "bf16", False)]
    if args.compile:
        modes.append(("bf16 autocast + torch.compile", "bf16", False))
    rows, base = [], None
    for name, amp, tf32 in modes:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        model = build(fit_rows, hidden, dropout=0.0)
        train, val = tensors(model, fit_rows), tensors(model, val_rows)
        cfg = LoopConfig(epochs=args.amp_epochs, batch_size=args.batch_size, learning_rate=1e-3, amp=amp,
                         patience=args.amp_epochs + 1, progress=False, device=device.type, grad_clip=1.0,
                         num_workers=args.workers, threads=args.threads, compile="compile" in name)
        fit(model, train, val, LoopConfig(**{**cfg.__dict__, "epochs": 1}))  # warm-up
        res = fit(model, train, val, cfg)
        dtype = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}[amp]
        bare = bare_gpu_samples_per_second(model, train, device, dtype, args.batch_size, args.amp_epochs)
        base = base or res.samples_per_second
        rows.append([name, f"{res.samples_per_second:,.0f}", f"{res.samples_per_second / base:.2f}",
                     f"{res.history[-1]['val_accuracy']:.4f}", "-" if math.isnan(bare) else f"{bare:,.0f}",
                     "-" if math.isnan(bare) else f"{res.samples_per_second / bare:.2f}"])
    torch.backends.cuda.matmul.allow_tf32 = False
    name = torch.cuda.get_device_name() if device.type == "cuda" else "CPU"
    table(f"3. Mixed precision on {name}: MLP {hidden}, {len(fit_rows):,} rows, batch {args.batch_size}, "
          f"{args.amp_epochs} epochs after a warm-up epoch (torch {torch.__version__})",
          ["precision", "fit samples/s", "vs fp32", "val acc", "bare on-device samples/s", "fit / bare"], rows)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", choices=["overhead", "incremental", "amp"], action="append",
                   help="run only these parts (repeatable) [default: overhead and incremental; amp with --cuda]")
    p.add_argument("--quick", action="store_true", help="scale everything down (a smoke run)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads for torch (0 = torch default) [1]")
    p.add_argument("--rows", type=int, default=5000, help="part 1: dataset rows [5000]")
    p.add_argument("--epochs", type=int, default=20, help="part 1: epochs [20]")
    p.add_argument("--repeats", type=int, default=5, help="part 1: timed runs per loop [5]")
    p.add_argument("--seeds", type=int, default=3, help="part 2: repetitions with different data [3]")
    p.add_argument("--reference-rows", type=int, default=5000, help="part 2 [5000]")
    p.add_argument("--recent-rows", type=int, default=3000, help="part 2 [3000]")
    p.add_argument("--test-rows", type=int, default=20000, help="part 2 [20000]")
    p.add_argument("--cuda", action="store_true", help="part 3 on the GPU")
    p.add_argument("--amp-rows", type=int, default=None, help="part 3 rows [1048576 on CUDA, 20000 on CPU]")
    p.add_argument("--amp-epochs", type=int, default=2, help="part 3 timed epochs [2]")
    p.add_argument("--hidden", default=None, help="part 3 MLP widths [4096,4096,4096 on CUDA, 256,256 on CPU]")
    p.add_argument("--batch-size", type=int, default=None, help="part 3 batch [8192 on CUDA, 512 on CPU]")
    p.add_argument("--workers", type=int, default=0, help="part 3 DataLoader workers [0]")
    p.add_argument("--compile", action="store_true", help="part 3: add a bf16 + torch.compile row")
    args = p.parse_args(argv)
    parts = args.only or (["amp"] if args.cuda else ["overhead", "incremental"])
    if args.amp_rows is None:
        args.amp_rows = 1 << 20 if args.cuda else 20000
    args.hidden = args.hidden or ("4096,4096,4096" if args.cuda else "256,256")
    args.batch_size = args.batch_size or (8192 if args.cuda else 512)
    if args.quick:
        args.rows, args.epochs, args.repeats, args.seeds = 2000, 5, 2, 1
        args.reference_rows, args.recent_rows, args.test_rows = 2000, 1000, 5000
        args.amp_rows, args.amp_epochs = min(args.amp_rows, 16384), 1
    if args.threads and not args.cuda:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU thread(s)"
          + (f", {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ", no CUDA device"))
    for part in parts:
        {"overhead": part_overhead, "incremental": part_incremental, "amp": part_amp}[part](args)


if __name__ == "__main__":
    main()
