"""training.entrypoint code that fails while driftloop trains it: a network whose outputs are NaN
is refused (nothing registered), an exception in the user's forward or dataset, or a sys.exit in
it, is one ``Error:`` line naming the spec (exit 2), never a traceback or the user's exit code.
Small real entrypoint modules written to tmp_path, real PyTorch on CPU, real MLflow SQLite."""
from __future__ import annotations

import math
import sys

import numpy as np
import pandas as pd
import pytest

from monitor.errors import DataError, DriftloopError
from tests.trainer.conftest import make_config
from tests.trainer.loop_job import LOOP, job
from trainer import registry as reg
from trainer.entrypoint import EntrypointError
from trainer.loop import NonFiniteLoss, fit

MODULE = "driftloop_failing_entry"
SOURCE = '''
import sys, torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.body = nn.Sequential(nn.Linear(4, 4), nn.ReLU()); self.head = nn.Linear(4, 1)
    def forward(self, x):
        return self.head(self.body(x)).squeeze(-1)

class Rows(torch.utils.data.Dataset):
    def __init__(self, refs): self.refs = list(refs)
    def __len__(self): return len(self.refs)
    def __getitem__(self, i):
        with open(self.refs[i]) as f:
            return torch.tensor([float(v) for v in f.read().split()], dtype=torch.float32)

class Good:
    embedding_feature = "emb"
    def build_model(self, task, n_outputs): return Net()
    def dataset(self, refs, train): return Rows(refs)
    def embed(self, model, x): return model.body(x)

class NaNNet(Net):
    def forward(self, x): return super().forward(x) * float("nan")

class NaNOut(Good):
    def build_model(self, task, n_outputs): return NaNNet()

class TrainBoom(Net):
    def forward(self, x):
        if self.training:
            raise RuntimeError("boom in forward during training")
        return super().forward(x)

class RaisesForward(Good):
    def build_model(self, task, n_outputs): return TrainBoom()

class RaisesDataset(Good):
    def dataset(self, refs, train): raise ValueError("boom in dataset")

class Exits(Good):
    def dataset(self, refs, train): sys.exit(3)

class Interrupted(Good):
    def dataset(self, refs, train): raise KeyboardInterrupt
'''


@pytest.fixture
def entry(tmp_path, monkeypatch, mlflow_template):
    """``(make_cfg, rows)``: 160 rows whose inputs are text files of 4 numbers, and configs for an
    object of the module written to tmp_path."""
    (tmp_path / f"{MODULE}.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    rng = np.random.default_rng(0)
    (tmp_path / "in").mkdir()
    uris, labels = [], []
    for i in range(160):
        x = rng.normal(size=4)
        path = tmp_path / "in" / f"{i}.txt"
        path.write_text(" ".join(f"{v:.5f}" for v in x))
        uris.append(str(path))
        labels.append(int(x[0] + 0.3 * rng.normal() > 0))
    rows = pd.DataFrame({"input_uri": uris, "y": labels})

    def make_cfg(obj: str, home: str = "home"):
        return make_config(tmp_path / home, mlflow_template, model={
            "name": "ep", "target": "y", "input_roots": [str(tmp_path / "in")],
            "features": [{"name": "emb", "type": "embedding", "dim": 4}]},
            training={"entrypoint": f"{MODULE}:{obj}", "epochs": 2, "min_rows": 50, "batch_size": 32,
                      "export": {"onnx": False}, "try_previous_versions": 0})
    yield make_cfg, rows
    sys.modules.pop(MODULE, None)


def versions(cfg) -> list:
    with reg.session(cfg):
        registry = reg.Registry(cfg)
        return list(registry.client.search_model_versions(f"name='{registry.name}'"))


def test_nan_outputs_are_refused_naming_the_epoch_and_nothing_is_registered(entry):
    from trainer import train_baseline
    make_cfg, rows = entry
    cfg = make_cfg("NaNOut")
    with pytest.raises(NonFiniteLoss) as err:
        train_baseline(cfg, rows)
    message = str(err.value)
    assert isinstance(err.value, DataError)
    assert f"{MODULE}:NaNOut" in message and "epoch 1" in message and "not finite" in message, message
    assert versions(cfg) == []


def test_a_builtin_model_whose_loss_goes_infinite_is_refused():
    """Driftloop's own model too: data that drives the loss to inf/NaN stops the loop at that epoch."""
    model, train, val = job(rows=200)
    poisoned = tuple(t.clone() for t in train)
    poisoned[0][:4] = float("inf")  # numeric inputs: the forward of these rows is not finite
    with pytest.raises(NonFiniteLoss, match="epoch 1") as err:
        fit(model, poisoned, val, LOOP)
    assert not math.isfinite(err.value.train_loss)


def test_an_exception_in_forward_is_one_error_naming_the_entrypoint(entry):
    from trainer import train_baseline
    make_cfg, rows = entry
    cfg = make_cfg("RaisesForward")
    with pytest.raises(EntrypointError) as err:
        train_baseline(cfg, rows)
    message = str(err.value)
    assert f"{MODULE}:RaisesForward" in message and "forward" in message, message
    assert "RuntimeError: boom in forward during training" in message
    assert isinstance(err.value.__cause__, RuntimeError)  # the traceback is kept
    assert versions(cfg) == []


def test_a_dataset_failing_on_every_row_says_so(entry):
    from trainer import train_baseline
    make_cfg, rows = entry
    with pytest.raises(DataError) as err:
        train_baseline(make_cfg("RaisesDataset"), rows)
    message = str(err.value)
    assert "all 160 rows were skipped" in message and "dataset(refs" in message, message
    assert f"{MODULE}:RaisesDataset" in message and "ValueError: boom in dataset" in message
    assert "is empty" not in message


def test_sys_exit_in_the_users_code_is_an_error_not_an_exit(entry, tmp_path, monkeypatch, capsys):
    import yaml

    from monitor.cli import main
    make_cfg, rows = entry
    cfg = make_cfg("Exits")
    rows.to_csv(tmp_path / "train.csv", index=False)
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump({
        "home": str(cfg.home), "model": {"name": "ep", "target": "y", "input_roots": [str(tmp_path / "in")],
                                          "features": [{"name": "emb", "type": "embedding", "dim": 4}]},
        "training": {"entrypoint": f"{MODULE}:Exits", "epochs": 2, "min_rows": 50, "progress": False}}))
    monkeypatch.chdir(tmp_path)
    assert main(["-c", "cfg.yaml", "train", "--data", "train.csv"]) == 2
    err = capsys.readouterr().err
    assert "Error:" in err and f"{MODULE}:Exits" in err and "sys.exit(3)" in err, err


def test_keyboard_interrupt_in_the_users_code_still_interrupts(entry):
    from trainer import train_baseline
    make_cfg, rows = entry
    with pytest.raises(KeyboardInterrupt):
        train_baseline(make_cfg("Interrupted"), rows)


def test_driftloop_errors_pass_through_the_user_code_guard():
    from trainer.entrypoint import running_user_code
    with pytest.raises(DriftloopError, match="ours"):
        with running_user_code("m:O", "training"):
            raise DriftloopError("ours")
    with pytest.raises(EntrypointError, match=r"sys.exit\(4\)"):
        with running_user_code("m:O", "training"):
            raise SystemExit(4)
