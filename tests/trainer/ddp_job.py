"""Run under ``torchrun --nproc_per_node 2``: DistributedDataParallel on CPU with gloo.

Each rank interrupts itself in epoch 2 (only rank 0 may write its checkpoint), resumes from
rank 0's checkpoint, finishes, and dumps its final weights; then both ranks call train_baseline,
of which only rank 0 may log to MLflow."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from tests.trainer.conftest import make_config
from tests.trainer.loop_job import job
from trainer import train_baseline
from trainer.distributed import from_env
from trainer.loop import LoopConfig, TrainingInterrupted, fit
from trainer.synthetic import make_dataset


def main(outdir: str, home: str) -> int:
    torch.set_num_threads(1)
    out = Path(outdir)
    rank = from_env().rank
    cfg = LoopConfig(epochs=4, batch_size=32, learning_rate=3e-3, progress=False, seed=3, device="cpu")
    model, train, val = job(rows=800)
    try:
        fit(model, train, val, cfg, checkpoint_path=out / f"ckpt-rank{rank}.pt",
            should_stop=lambda s: s.step == 10)  # mid-epoch 2
        raise AssertionError("not interrupted")
    except TrainingInterrupted:
        pass
    wrote = (out / f"ckpt-rank{rank}.pt").exists()
    result = fit(model, train, val, cfg, checkpoint_path=out / "ckpt-rank0.pt", resume=True)
    torch.save(model.state_dict(), out / f"weights-rank{rank}.pt")
    outcome = train_baseline(make_config(Path(home)), make_dataset(1000, seed=1))
    (out / f"rank{rank}.json").write_text(json.dumps({
        "wrote_checkpoint": wrote, "steps": result.steps, "val_accuracy": result.history[-1]["val_accuracy"],
        "version": outcome.version if outcome else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
