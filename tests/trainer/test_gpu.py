"""CUDA paths of the loop: fp16 autocast with a live GradScaler, pinned-memory loading, and
deterministic resume on the GPU. Self-contained (torch, numpy, pandas only) so it also runs with
``--noconftest`` on a GPU machine without driftloop's other dependencies."""
import os

import pytest
import torch

from trainer.checkpoint import load_checkpoint
from trainer.loop import LoopConfig, TrainingInterrupted, fit
from trainer.model import MLP, TabularModel
from trainer.synthetic import NUMERIC, make_dataset

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with a driver")]
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before the first cuBLAS call, for determinism

CATEGORICAL = ["region", "device"]


def job(rows=4000):
    data = make_dataset(rows, seed=0)
    fit_rows, val_rows = data.iloc[: int(rows * 0.8)], data.iloc[int(rows * 0.8):]
    vocab, mean, std = TabularModel.preprocessing_from(fit_rows, NUMERIC, CATEGORICAL)
    torch.manual_seed(0)
    model = TabularModel(MLP(len(NUMERIC), [len(vocab[c]) + 1 for c in CATEGORICAL], [256, 128], 0.1),
                         NUMERIC, CATEGORICAL, vocab, mean, std)

    def tensors(df):
        x_num, x_cat = model.encode(df)
        return x_num, x_cat, torch.as_tensor(df["label"].to_numpy(), dtype=torch.float32)
    return model, tensors(fit_rows), tensors(val_rows)


def test_fp16_autocast_with_grad_scaler_trains_checkpoints_and_resumes(tmp_path):
    cfg = LoopConfig(epochs=6, batch_size=128, learning_rate=3e-3, amp="fp16", device="cuda", progress=False,
                     grad_accum_steps=2)
    model, train, val = job()
    ckpt = tmp_path / "ckpt.pt"
    with pytest.raises(TrainingInterrupted):
        fit(model, train, val, cfg, checkpoint_path=ckpt, should_stop=lambda s: s.step == 20)
    scaler = load_checkpoint(ckpt)["scaler"]
    assert scaler["scale"] > 0 and "_growth_tracker" in scaler
    result = fit(model, train, val, cfg, checkpoint_path=ckpt, resume=True)
    assert next(model.parameters()).is_cuda
    assert result.history[-1]["val_accuracy"] > 0.8


def test_deterministic_resume_on_cuda_is_bitwise(tmp_path):
    cfg = LoopConfig(epochs=4, batch_size=64, learning_rate=3e-3, amp="bf16", device="cuda", progress=False,
                     deterministic=True)
    reference, train, val = job()
    fit(reference, train, val, cfg)
    resumed, train, val = job()
    with pytest.raises(TrainingInterrupted):
        fit(resumed, train, val, cfg, checkpoint_path=tmp_path / "c.pt", should_stop=lambda s: s.step == 33)
    resumed, train, val = job()
    fit(resumed, train, val, cfg, checkpoint_path=tmp_path / "c.pt", resume=True)
    a, b = reference.state_dict(), resumed.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_rows_fit_on_the_device_and_pinned_copies_train_alike(monkeypatch):
    """Small tables are moved to the GPU once; with a zero budget the same run gathers into pinned
    memory instead. Deterministic, both give the same weights."""
    import trainer.loop as loop
    cfg = LoopConfig(epochs=2, batch_size=128, learning_rate=3e-3, amp="bf16", device="cuda", progress=False,
                     deterministic=True)
    on_device, train, val = job()
    assert loop.placement(train, torch.device("cuda")) == "device"
    fit(on_device, train, val, cfg)
    monkeypatch.setattr(loop, "DEVICE_BUDGET", 0.0)
    pinned, train, val = job()
    assert loop.placement(train, torch.device("cuda")) == "pinned"
    fit(pinned, train, val, cfg)
    a, b = on_device.state_dict(), pinned.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_no_host_sync_per_step_on_cuda(monkeypatch):
    """fp16 + GradScaler + clipping on the GPU, and not one .item() per step (fused AdamW takes the
    scaler's found_inf on the device)."""
    calls = {"n": 0}
    real_item = torch.Tensor.item

    def counting_item(self):
        calls["n"] += 1
        return real_item(self)
    model, train, val = job()
    cfg = LoopConfig(epochs=2, batch_size=128, learning_rate=3e-3, amp="fp16", device="cuda", progress=False)
    monkeypatch.setattr(torch.Tensor, "item", counting_item)
    result = fit(model, train, val, cfg)
    monkeypatch.undo()
    assert result.steps > 40
    assert calls["n"] <= 2 * cfg.epochs, calls


@pytest.mark.parametrize("amp", ["bf16", "fp16"])
def test_no_cuda_sync_per_step(amp):
    """What CUDA itself counts as a synchronisation (torch.cuda.set_sync_debug_mode warns on each
    one: .item(), a device-to-host copy, a stream sync), whoever makes it (the loop, GradScaler,
    clipping, the optimizer): twice the steps in an epoch, the same number (issue 38)."""
    import warnings

    def syncs(batch_size: int) -> tuple[int, int]:
        model, train, val = job()
        cfg = LoopConfig(epochs=2, batch_size=batch_size, learning_rate=3e-3, amp=amp, device="cuda",
                         progress=False, grad_clip=1.0)
        torch.cuda.synchronize()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                result = fit(model, train, val, cfg)
            finally:
                torch.cuda.set_sync_debug_mode("default")
        return result.steps, sum("synchroniz" in str(w.message) for w in caught)

    steps, count = syncs(128)
    steps2, count2 = syncs(64)
    print(amp, "steps", steps, steps2, "syncs", count, count2)
    assert steps2 >= 2 * steps - 2
    assert count2 - count <= 2, (count, count2)
