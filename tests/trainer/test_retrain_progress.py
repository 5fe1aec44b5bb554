"""A retrain's progress (trainer/retrain_progress.py): the worker rewrites progress.json beside its
result after the epochs of each model it trains, at a bounded rate; the contract reads it back and
says it in one line, naming the warm start and the fresh model when both train."""
from __future__ import annotations

import json

import pytest

from monitor.retrain_contract import RetrainProgress
from tests.trainer.conftest import FAST_TRAINING
from trainer.retrain_progress import ProgressFile
from trainer.synthetic import make_dataset
from trainer.worker import PROGRESS, main


class Clock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_the_file_holds_each_series_latest_epoch_at_a_bounded_rate(tmp_path):
    clock = Clock()
    progress = ProgressFile(tmp_path / PROGRESS, clock=clock, every=1.0)
    clock.t += 2
    progress.epoch("warm", 10, 600, {"epoch": 1, "train_loss": 0.9, "val_loss": 0.8})
    first = RetrainProgress.parse((tmp_path / PROGRESS).read_text())
    assert first.series["warm"].epoch == 1 and first.series["warm"].seconds == 2
    assert first.describe() == "epoch 1/10, val_loss 0.8000, 600 rows"
    clock.t += 0.5
    progress.epoch("warm", 10, 600, {"epoch": 2, "train_loss": 0.7, "val_loss": float("nan")})
    assert RetrainProgress.parse((tmp_path / PROGRESS).read_text()) == first  # half a second later: not rewritten
    clock.t += 0.1
    progress.epoch("cold", 30, 600, {"epoch": 1, "train_loss": 1.2, "val_loss": 1.1})  # a new model: written at once
    both = RetrainProgress.parse((tmp_path / PROGRESS).read_text())
    assert both.series["warm"].epoch == 2 and both.series["warm"].val_loss is None  # NaN: no figure
    assert both.updated - both.started == pytest.approx(2.6)
    assert both.describe() == "warm epoch 2/10; cold epoch 1/30, val_loss 1.1000; 600 rows"
    assert json.loads((tmp_path / PROGRESS).read_text())["series"]["cold"]["epochs"] == 30
    # The last epoch, held back by the rate, is written with the end of training, whatever the rate.
    clock.t += 0.1
    progress.epoch("cold", 30, 600, {"epoch": 2, "train_loss": 1.0, "val_loss": 0.9})
    assert RetrainProgress.parse((tmp_path / PROGRESS).read_text()).series["cold"].epoch == 1
    progress.stage("judging")
    judging = RetrainProgress.parse((tmp_path / PROGRESS).read_text())
    assert judging.stage == "judging" and judging.series["cold"].epoch == 2
    assert judging.describe() == ("judging the challenger after warm epoch 2/10; cold epoch 2/30, val_loss 0.9000; "
                                  "600 rows")


def test_a_progress_file_without_a_stage_is_still_read_as_training():
    # progress.json written before the stage existed (a child of the previous release still running)
    old = RetrainProgress.parse({"started": 1.0, "updated": 3.0, "series": {"warm": {
        "epoch": 1, "epochs": 5, "rows": 10, "seconds": 2.0}}})
    assert old.stage == "training" and old.describe() == "epoch 1/5, 10 rows"
    assert RetrainProgress(started=1.0, updated=1.0, stage="publishing").describe() == \
        "registering and exporting the challenger"


def test_the_worker_writes_progress_beside_its_result(tcfg, champion, tmp_path):
    window = tmp_path / "window.parquet"
    make_dataset(1200, seed=21, concept_shift=1.0).to_parquet(window)
    request = {"config": {"home": str(tcfg.home), "training": {**FAST_TRAINING, "cold_start": "always"}},
               "trigger": "alert", "window": {"source": "file", "path": str(window)}}
    req, res = tmp_path / "job" / "request.json", tmp_path / "job" / "result.json"
    req.parent.mkdir()
    req.write_text(json.dumps(request))
    assert main([str(req), str(res)]) == 0, res.read_text()
    progress = RetrainProgress.parse((res.parent / PROGRESS).read_text())
    # The warm start and the fresh model competing with it (cold_start: always) are both there.
    assert set(progress.series) == {"warm", "cold"}, progress
    warm = progress.series["warm"]
    assert 1 <= warm.epoch <= warm.epochs and warm.rows > 0 and warm.val_loss is not None
    # Written last: the stage after training (the registry and the exports), with both models' last epochs.
    assert progress.stage == "publishing"
    assert progress.describe().startswith("registering and exporting the challenger after warm epoch ")
    assert "; cold epoch " in progress.describe()
