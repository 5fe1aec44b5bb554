#!/usr/bin/env python
"""What driftloop's loop costs a user's own model (``training.entrypoint``) against a bare PyTorch loop.

The same small CNN, data and work in both: sklearn's 8x8 digits written as ``.npy`` files to a
temporary directory and read by a ``Dataset`` (one ``np.load`` per item, a little noise on
training items), AdamW with the same learning rate and weight decay, cosine LR decay, gradient
clipping, the same batch size and epochs, and an evaluation of the validation rows after each
epoch with the same figures (loss, accuracy, macro ROC AUC; rows stacked once in both: evaluation
items do not vary). Early stopping cannot end driftloop's
run early (patience > epochs) and no checkpoint is written, so both do the same number of steps.

(a) ``trainer.loop.fit`` on ``EntrypointModel.training_data`` (the path ``driftloop train`` takes
    with an entrypoint: ShardedBatches order, default_collate, autocast/GradScaler pass-through,
    signal handling, per-epoch metrics);
(b) a hand-written loop: ``DataLoader(shuffle=True)``, forward, cross-entropy, backward, clip, step.

Prints the median wall and CPU seconds over ``--repeats`` (alternating a and b) and the ratio a / b.
Goal: <= 1.05 on CPU.

    python bench/bench_entrypoint.py --repeats 7
"""
from __future__ import annotations

import argparse
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
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, Dataset, StackDataset, TensorDataset  # noqa: E402

from trainer.entrypoint_model import EntrypointModel  # noqa: E402
from trainer.loop import LoopConfig, fit  # noqa: E402
from trainer.metrics import task_metrics  # noqa: E402

CLASSES = [str(i) for i in range(10)]


class Images(Dataset):
    def __init__(self, refs, train: bool):
        self.refs, self.train = list(refs), train

    def __len__(self) -> int:
        return len(self.refs)

    def __getitem__(self, i: int) -> torch.Tensor:
        x = torch.from_numpy(np.load(self.refs[i])).float().div(16.0).unsqueeze(0)
        return x + 0.05 * torch.randn_like(x) if self.train else x


class Digits:
    """The user's object (training.entrypoint's protocol)."""

    def build_model(self, task: str, n_outputs: int) -> nn.Module:
        return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.Flatten(),
                             nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, n_outputs))

    def dataset(self, refs, train: bool) -> Dataset:
        return Images(refs, train)


def write_digits(directory: Path) -> pd.DataFrame:
    from sklearn.datasets import load_digits
    digits = load_digits()
    rows = []
    for i, image in enumerate(digits.images):
        path = directory / f"{i}.npy"
        np.save(path, image.astype(np.float32))
        rows.append({"input_uri": str(path), "label": int(digits.target[i])})
    return pd.DataFrame(rows).sample(frac=1.0, random_state=0).reset_index(drop=True)


def driftloop_fit(fit_rows: pd.DataFrame, val_rows: pd.DataFrame, cfg: LoopConfig) -> None:
    user = Digits()
    torch.manual_seed(cfg.seed)
    model = EntrypointModel("bench_entrypoint:Digits", user.build_model("multiclass", 10), user,
                            task="multiclass", classes=CLASSES)
    fit(model, model.training_data(fit_rows, "label", True), model.training_data(val_rows, "label", False), cfg)


def bare_fit(fit_rows: pd.DataFrame, val_rows: pd.DataFrame, cfg: LoopConfig) -> None:
    user = Digits()
    torch.manual_seed(cfg.seed)
    model = user.build_model("multiclass", 10)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    y = torch.as_tensor(fit_rows["label"].to_numpy())
    images = user.dataset(fit_rows["input_uri"], True)
    loader = DataLoader(StackDataset(images, TensorDataset(y)), batch_size=cfg.batch_size, shuffle=True)
    val_images = user.dataset(val_rows["input_uri"], False)
    x_val = torch.stack([val_images[i] for i in range(len(val_rows))])
    y_val = torch.as_tensor(val_rows["label"].to_numpy())
    total, step = cfg.epochs * math.ceil(len(y) / cfg.batch_size), 0
    for _ in range(cfg.epochs):
        model.train()
        for x, (target,) in loader:
            lr = cfg.learning_rate * (cfg.min_lr_ratio
                                      + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * step / total)))
            for group in opt.param_groups:
                group["lr"] = lr
            step += 1
            loss = F.cross_entropy(model(x), target)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip or math.inf)
            opt.step()
            opt.zero_grad(set_to_none=True)
        model.eval()
        with torch.no_grad():
            logits = model(x_val)
            F.cross_entropy(logits, y_val).item()
            task_metrics("multiclass", y_val.numpy(), torch.softmax(logits, -1).numpy())  # fit's figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cfg = LoopConfig(epochs=args.epochs, batch_size=args.batch_size, learning_rate=3e-3, patience=args.epochs + 1,
                     progress=False, checkpoint_every_minutes=1e9, seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        rows = write_digits(Path(tmp))
        fit_rows, val_rows = rows.iloc[:1400].reset_index(drop=True), rows.iloc[1400:].reset_index(drop=True)
        arms = {"bare PyTorch loop": bare_fit, "trainer.loop.fit via training.entrypoint": driftloop_fit}
        wall: dict[str, list[float]] = {k: [] for k in arms}
        cpu: dict[str, list[float]] = {k: [] for k in arms}
        for _ in range(args.repeats):
            for name, run in arms.items():
                w0, c0 = time.perf_counter(), time.process_time()
                run(fit_rows, val_rows, cfg)
                wall[name].append(time.perf_counter() - w0)
                cpu[name].append(time.process_time() - c0)
    print(f"{len(fit_rows)} training rows x {args.epochs} epochs, batch {args.batch_size}, "
          f"{args.threads} torch thread(s), {args.repeats} repeats")
    bare_wall, bare_cpu = (statistics.median(wall["bare PyTorch loop"]), statistics.median(cpu["bare PyTorch loop"]))
    print(f"{'loop':45s} {'median wall s':>14s} {'median CPU s':>13s} {'ratio wall':>11s} {'ratio CPU':>10s}")
    for name in arms:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        print(f"{name:45s} {w:14.3f} {c:13.3f} {w / bare_wall:11.3f} {c / bare_cpu:10.3f}")


if __name__ == "__main__":
    main()
