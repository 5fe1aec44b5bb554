"""A small, deterministic training job shared by the loop tests; run as a module it is the child
process a test interrupts with SIGTERM (``python -m tests.trainer.loop_job CHECKPOINT MARKER``)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from monitor.config import load_config
from trainer.build import build_model
from trainer.data import check_frame, split, tensors
from trainer.loop import EXIT_INTERRUPTED, LoopConfig, TrainingInterrupted, fit
from trainer.synthetic import make_dataset

LOOP = LoopConfig(epochs=12, batch_size=32, grad_accum_steps=2, learning_rate=3e-3, patience=50, seed=3,
                  progress=False, checkpoint_every_minutes=60.0)


def job(rows: int = 600, seed: int = 0, hidden=(32, 16)):
    """``(model, train, val)``: the same untrained model and tensors every time for the same args."""
    cfg = load_config(path=None, environ={}, overrides={"training": {"hidden": list(hidden), "dropout": 0.2}})
    data = check_frame(make_dataset(rows, seed=seed), cfg.model)
    fit_rows, val_rows = split(data, 0.25, "label", seed=0)
    model = build_model(cfg, fit_rows, seed=11)
    return model, tensors(model, fit_rows, "label"), tensors(model, val_rows, "label")


def main(checkpoint: str, marker: str) -> int:
    torch.set_num_threads(1)
    model, train, val = job()

    def slow_epochs(record):  # leaves the test time to signal us mid-run; does not touch numerics
        Path(marker).write_text(str(record["epoch"]))
        time.sleep(0.5)

    try:
        fit(model, train, val, LOOP, checkpoint_path=Path(checkpoint), on_epoch_end=slow_epochs)
    except TrainingInterrupted:
        return EXIT_INTERRUPTED
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
