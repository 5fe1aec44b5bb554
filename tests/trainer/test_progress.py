"""What a person sees of a training run: a line per epoch at INFO (DEBUG with ``--quiet``), the time
left, no MLflow hints among the lines, and the CPU threads a small model trains on (issue 37, item 7)."""
import logging
import re
import warnings

import pytest
import torch

from monitor.cli import main
from tests.trainer.loop_job import LOOP, job
from trainer.distributed import Dist
from trainer.loop import LoopConfig, fit
from trainer.loop_setup import ONE_THREAD_FLOPS, EpochProgress, Progress, cpu_threads
from trainer.synthetic import make_dataset

CPU = torch.device("cpu")


def progress_records(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if isinstance(getattr(r, "progress", None), EpochProgress)]


@pytest.mark.parametrize("shown, level", [(True, logging.INFO), (False, logging.DEBUG)])
def test_fit_logs_one_line_per_epoch_at_info_unless_progress_is_off(caplog, shown, level):
    model, train, val = job(rows=200)
    cfg = LoopConfig(**{**LOOP.__dict__, "epochs": 3, "progress": shown})
    with caplog.at_level(logging.DEBUG, logger="trainer.loop"):
        result = fit(model, train, val, cfg)
    records = progress_records(caplog)
    assert [(r.progress.epoch, r.progress.epochs) for r in records] == [(1, 3), (2, 3), (3, 3)]
    assert {r.levelno for r in records} == {level}
    losses = [h["val_loss"] for h in result.history]
    assert [r.progress.improved for r in records] == [all(x < p for p in losses[:i]) for i, x in enumerate(losses)]
    assert records[-1].progress.left == 0.0


def test_time_left_is_the_mean_epoch_time_over_the_epochs_to_go():
    ticks = iter([100.0, 104.0, 110.0, 112.0])
    progress = Progress(LoopConfig(epochs=10, progress=False), Dist(), total=1000, initial=0, first_epoch=0,
                        clock=lambda: next(ticks))
    first = progress.epoch_end({"epoch": 1, "train_loss": 0.5, "val_loss": 0.4}, improved=True, stopped_early=False)
    assert (first.epoch, first.epochs, first.seconds, first.left) == (1, 10, 4.0, 36.0)
    second = progress.epoch_end({"epoch": 2, "val_loss": 0.5}, improved=False, stopped_early=False)
    assert (second.seconds, second.left) == (10.0, 40.0)  # 5 s per epoch, 8 to go
    last = progress.epoch_end({"epoch": 3, "val_loss": 0.6}, improved=False, stopped_early=True)
    assert last.left == 0.0 and last.stopped_early


def test_a_resumed_run_estimates_from_its_own_epochs():
    ticks = iter([0.0, 3.0])
    progress = Progress(LoopConfig(epochs=10, progress=False), Dist(), total=1000, initial=500, first_epoch=5,
                        clock=lambda: next(ticks))
    done = progress.epoch_end({"epoch": 6, "val_loss": 0.4}, improved=True, stopped_early=False)
    assert (done.seconds, done.left) == (3.0, 12.0)


def test_other_ranks_write_no_lines(caplog):
    progress = Progress(LoopConfig(epochs=2), Dist(rank=1, world_size=2), total=10, initial=0, first_epoch=0,
                        clock=iter([0.0, 1.0]).__next__)
    with caplog.at_level(logging.DEBUG, logger="trainer.loop"):
        progress.epoch_end({"epoch": 1, "val_loss": 0.4}, improved=True, stopped_early=False)
    assert progress_records(caplog) == []


EPOCH_LINE = re.compile(r"^\S+ INFO +trainer\.loop: epoch (\d+)/3: train_loss [\d.]+, val_loss [\d.]+", re.M)


def test_train_prints_the_epochs_at_the_default_level_and_quiet_hides_them(home, tmp_path, capsys):
    """`driftloop train` on a file: an epoch line each, no MLflow hint among them; `-q`: none."""
    make_dataset(600, seed=1).to_csv(tmp_path / "train.csv", index=False)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert main(["train", "--data", "train.csv", "--epochs", "3"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("Registered driftloop-demo v1")
    assert [int(e) for e in EPOCH_LINE.findall(err)] == [1, 2, 3], err
    assert [str(w.message) for w in seen if "mlflow" in w.filename] == []

    assert main(["train", "--data", "train.csv", "--epochs", "3", "-q"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("Registered driftloop-demo v2") and EPOCH_LINE.findall(err) == []


def test_a_small_dense_model_trains_on_one_cpu_thread_unless_told():
    model, _, _ = job(rows=100)
    params = sum(p.numel() for p in model.parameters())
    assert cpu_threads(LoopConfig(batch_size=64), model, CPU, dense=True) == 1
    assert cpu_threads(LoopConfig(batch_size=64, threads=3), model, CPU, dense=True) == 3  # as configured
    huge = int(ONE_THREAD_FLOPS / (6 * params)) + 1  # rows per micro-batch that make the step large
    assert cpu_threads(LoopConfig(batch_size=huge), model, CPU, dense=True) == 0  # torch's default
    assert cpu_threads(LoopConfig(batch_size=64), model, CPU, dense=False) == 0  # a training.entrypoint network
    assert cpu_threads(LoopConfig(batch_size=64), model, torch.device("cuda"), dense=True) == 0


def test_fit_restores_the_process_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        model, train, val = job(rows=100)
        fit(model, train, val, LoopConfig(**{**LOOP.__dict__, "epochs": 1}))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
