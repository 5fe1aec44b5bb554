import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.support.waiting import wait_until
from tests.trainer.loop_job import LOOP, job
from trainer.checkpoint import load_checkpoint, save_checkpoint
from trainer.loop import (EXIT_INTERRUPTED, CheckpointMismatch, LoopConfig, TrainingInterrupted, evaluate, fit,
                          peek_checkpoint)

REPO = Path(__file__).resolve().parents[2]


def assert_same_weights(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    different = [k for k in sa if not torch.equal(sa[k], sb[k])]
    assert not different, f"tensors differ: {different}"


@pytest.fixture(scope="module")
def uninterrupted():
    torch.set_num_threads(1)
    model, train, val = job()
    result = fit(model, train, val, LOOP)
    return model, result


@pytest.mark.parametrize("stop_at_step", [7, 10])  # mid-epoch (after a partial accumulation) / epoch end
def test_resume_after_interruption_is_bitwise_identical(tmp_path, uninterrupted, stop_at_step):
    reference, ref_result = uninterrupted
    ckpt = tmp_path / "ckpt.pt"
    model, train, val = job()
    with pytest.raises(TrainingInterrupted) as err:
        fit(model, train, val, LOOP, checkpoint_path=ckpt, extra={"run_id": "r1"},
            should_stop=lambda s: s.step == stop_at_step)
    assert err.value.checkpoint == ckpt and ckpt.exists()
    assert peek_checkpoint(ckpt) == {"run_id": "r1"}
    assert load_checkpoint(ckpt)["state"]["step"] == stop_at_step

    resumed, train, val = job()  # a fresh process would rebuild the model from scratch too
    result = fit(resumed, train, val, LOOP, checkpoint_path=ckpt, resume=True)
    assert_same_weights(reference, resumed)
    assert result.history == ref_result.history
    assert result.steps == ref_result.steps
    assert not ckpt.exists(), "a finished run removes its checkpoint so a later --resume cannot pick it up"


def test_sigterm_checkpoints_exits_75_and_resumes_identically(tmp_path, uninterrupted):
    ckpt, marker = tmp_path / "ckpt.pt", tmp_path / "epoch"
    proc = subprocess.Popen([sys.executable, "-m", "tests.trainer.loop_job", str(ckpt), str(marker)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def epoch_done() -> bool:
        assert proc.poll() is None, proc.stdout.read().decode()
        return marker.exists()

    wait_until(epoch_done, 120, message="child never finished an epoch")
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == EXIT_INTERRUPTED, out
    saved = load_checkpoint(ckpt)
    assert 0 < saved["state"]["epoch"] < LOOP.epochs

    resumed, train, val = job()
    fit(resumed, train, val, LOOP, checkpoint_path=ckpt, resume=True)
    assert_same_weights(uninterrupted[0], resumed)


def test_resume_refuses_other_data_or_settings(tmp_path):
    ckpt = tmp_path / "ckpt.pt"
    model, train, val = job()
    with pytest.raises(TrainingInterrupted):
        fit(model, train, val, LOOP, checkpoint_path=ckpt, fingerprint="data-a", should_stop=lambda s: s.step == 3)
    with pytest.raises(CheckpointMismatch, match="the training data differ"):
        fit(model, train, val, LOOP, checkpoint_path=ckpt, fingerprint="data-b", resume=True)
    other = LoopConfig(**{**LOOP.__dict__, "learning_rate": 1.0, "num_workers": 1})
    with pytest.raises(CheckpointMismatch, match="settings changed: learning_rate"):
        fit(model, train, val, other, checkpoint_path=ckpt, fingerprint="data-a", resume=True)


def test_time_based_checkpoint_mid_epoch_with_injected_clock(tmp_path):
    ckpt = tmp_path / "ckpt.pt"
    now = [0.0]

    def clock():  # half an hour passes per call: the 60-minute interval elapses every other step
        now[0] += 1800.0
        return now[0]

    seen = {}

    def probe(state):
        if state.step == 5:
            seen.update(load_checkpoint(ckpt)["state"]) if ckpt.exists() else None
        return state.step == 5

    model, train, val = job()
    with pytest.raises(TrainingInterrupted):
        fit(model, train, val, LOOP, checkpoint_path=ckpt, clock=clock, should_stop=probe)
    assert seen, "no checkpoint was written before the first epoch ended"
    assert seen["epoch"] == 0 and 0 < seen["step"] < 5


def test_early_stopping_restores_the_best_weights():
    model, train, val = job(rows=300, hidden=(128, 128))
    noisy = (train[0], train[1], train[2][torch.randperm(len(train[2]), generator=torch.Generator().manual_seed(0))])
    cfg = LoopConfig(epochs=80, batch_size=16, learning_rate=1e-2, patience=3, seed=1, progress=False)
    result = fit(model, noisy, val, cfg)
    assert result.stopped_early
    assert result.epochs_run == result.best_epoch + cfg.patience < cfg.epochs
    best = min(h["val_loss"] for h in result.history)
    assert result.best_val_loss == best
    assert math.isclose(evaluate(model, val, torch.device("cpu"))["loss"], best, rel_tol=1e-6)


def test_bf16_autocast_on_cpu_learns_like_fp32_and_fp16_needs_cuda():
    accuracies = {}
    for amp in ("off", "bf16"):
        model, train, val = job()
        result = fit(model, train, val,
                     LoopConfig(epochs=6, batch_size=32, learning_rate=3e-3, amp=amp, progress=False))
        assert all(math.isfinite(h["train_loss"]) for h in result.history)
        accuracies[amp] = result.history[-1]["val_accuracy"]
    assert accuracies["off"] > 0.75
    assert abs(accuracies["bf16"] - accuracies["off"]) < 0.05
    with pytest.raises(ValueError, match="use 'bf16' on CPU"):
        fit(model, train, val, LoopConfig(epochs=1, amp="fp16", device="cpu", progress=False))


def test_gradient_checkpointing_gives_the_same_gradients():
    model, train, _ = job()
    x_num, x_cat, y = (t[:64] for t in train)
    grads = []
    for enabled in (False, True):
        model.net.set_gradient_checkpointing(enabled)
        model.train()
        model.zero_grad()
        torch.manual_seed(5)  # same dropout masks; checkpoint replays the RNG state in its recompute
        torch.nn.functional.binary_cross_entropy_with_logits(model(x_num, x_cat), y).backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    for name in grads[0]:
        assert torch.allclose(grads[0][name], grads[1][name], atol=1e-7), name


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, {"step": 1, "w": torch.ones(3)})

    def torn_save(obj, f, *args, **kwargs):
        f.write(b"partial bytes")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", torn_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, {"step": 2, "w": torch.zeros(3)})
    monkeypatch.undo()
    assert load_checkpoint(path)["step"] == 1
    assert os.listdir(tmp_path) == ["ckpt.pt"], "temporary file left behind"


@pytest.mark.parametrize("rows, world", [(10, 1), (11, 2), (3, 4), (97, 3)])
def test_sharded_batches_follow_distributed_sampler(rows, world):
    from torch.utils.data import DistributedSampler, TensorDataset

    from trainer.distributed import Dist
    from trainer.sampling import ShardedBatches

    data = TensorDataset(torch.arange(rows))
    for rank in range(world):
        ours = ShardedBatches(data, Dist(rank, rank, world), seed=4, epoch=2, batch_size=4)
        reference = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=4)
        reference.set_epoch(2)
        assert torch.cat(list(ours)).tolist() == list(reference)
        resumed = ShardedBatches(data, Dist(rank, rank, world), seed=4, epoch=2, batch_size=4, skip_batches=1)
        rest = [i for batch in resumed for i in batch.tolist()]
        assert rest == list(reference)[4:]
        assert len(resumed) == len(list(resumed))


def test_rows_are_indexed_in_place_on_cpu_and_the_dataloader_only_serves_workers():
    from trainer.loop import placement
    _, train, _ = job()
    assert placement(train, torch.device("cpu")) == "device"
    assert placement(train, torch.device("cpu"), num_workers=2) == "loader"


def test_direct_indexing_trains_bit_identically_to_the_dataloader(uninterrupted):
    """The loop without a DataLoader (num_workers=0) and with one (worker processes) see the same
    batches and leave the global RNG alone alike: the same weights, bit for bit."""
    reference, _ = uninterrupted
    model, train, val = job()
    fit(model, train, val, LoopConfig(**{**LOOP.__dict__, "num_workers": 1}))
    assert_same_weights(reference, model)


# Tensor methods that read a value back to the host: on CUDA each waits for the GPU (a sync point).
HOST_READS = ("item", "tolist", "cpu", "numpy", "nonzero", "__bool__", "__float__", "__int__", "__index__")


def test_no_host_sync_per_step(monkeypatch):
    """The loop's own bookkeeping stays on the device: the loop's modules (trainer/loop.py and the
    batches, objective and set-up it was split into) read a tensor back to the host (HOST_READS) a
    fixed number of times per epoch (the epoch's loss, evaluation, best weights), never once per step:
    twice the steps, the same reads. (On CPU torch's AdamW reads its step counter with .item(), which
    is no sync there; tests/trainer/test_gpu.py counts every sync on CUDA.)"""
    loop_files = tuple(os.path.join("trainer", f"{name}.py")
                       for name in ("loop", "batches", "objective", "loop_setup", "loop_records", "sampling"))
    calls: dict[str, int] = {}

    def counting(name):
        real = getattr(torch.Tensor, name)

        def read(self, *args, **kwargs):
            if sys._getframe(1).f_code.co_filename.endswith(loop_files):
                calls[name] = calls.get(name, 0) + 1
            return real(self, *args, **kwargs)
        return read

    def reads(batch_size: int) -> tuple[int, dict[str, int]]:
        model, train, val = job()
        cfg = LoopConfig(**{**LOOP.__dict__, "epochs": 2, "grad_accum_steps": 1, "batch_size": batch_size})
        calls.clear()
        with monkeypatch.context() as m:
            for name in HOST_READS:
                m.setattr(torch.Tensor, name, counting(name))
            result = fit(model, train, val, cfg)
        return result.steps, dict(calls)

    steps, per_run = reads(LOOP.batch_size)
    steps2, per_run2 = reads(LOOP.batch_size // 2)
    assert steps > 20 and steps2 >= 2 * steps - 2
    assert per_run2 == per_run, (per_run, per_run2)  # nothing counted per step
    assert per_run.get("item", 0) <= 2 * 2  # epoch loss + validation loss, per epoch


@pytest.mark.slow
def test_torch_compile_behind_the_flag_trains_and_checkpoints_the_plain_model(tmp_path):
    pytest.importorskip("torch._inductor")
    model, train, val = job(rows=300)
    cfg = LoopConfig(**{**LOOP.__dict__, "epochs": 2, "compile": True})
    try:
        result = fit(model, train, val, cfg)
    except Exception as exc:  # no C++ compiler here: say so rather than pass silently
        if "compiler" in str(exc).lower() or "InvalidCxxCompiler" in type(exc).__name__:
            pytest.skip(f"torch.compile cannot build here: {exc}")
        raise
    assert result.epochs_run == 2 and math.isfinite(result.best_val_loss)
    assert not any(k.startswith("_orig_mod") for k in model.state_dict())  # the model, not the compiled wrapper
