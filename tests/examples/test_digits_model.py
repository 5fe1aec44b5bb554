"""examples/digits/model.py as driftloop loads it (``training.entrypoint``): the protocol's methods,
and (on a GPU) the CNN trained by driftloop's trainer with fp16 AMP on CUDA."""
from __future__ import annotations

import pytest
import torch

from examples.digits import data
from examples.digits.loop import MODEL, DigitsPlan, settings, train_baseline
from examples.digits.model import Digits, DigitsNet
from trainer.entrypoint import load_entrypoint


@pytest.fixture(scope="module")
def refs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("digits")
    index = data.write_digits(folder, seed=0)
    return index["input_uri"].head(16).tolist(), index["label"].head(16).tolist()


def test_driftloop_loads_it_by_its_spec():
    entry = load_entrypoint("examples.digits.model:Digits")
    assert isinstance(entry, Digits) and entry.embedding_feature == "image_emb"


def test_build_model_dataset_and_embed(refs):
    uris, _ = refs
    entry = Digits()
    net = entry.build_model("multiclass", 10)
    assert isinstance(net, DigitsNet)
    items = entry.dataset(uris, train=False)
    assert len(items) == 16 and items[0].shape == (1, 8,
                                                   8) and 0.0 <= float(items[0].min()) <= float(items[0].max()) <= 1.0
    x = torch.utils.data.default_collate([items[i] for i in range(len(items))])
    assert net(x).shape == (16, 10) and entry.embed(net, x).shape == (16, 32)
    assert torch.equal(items[3], entry.dataset(uris, train=False)[3])  # evaluation items do not vary
    with pytest.raises(ValueError, match="multiclass"):
        entry.build_model("binary", 1)


def test_training_items_augment_from_torchs_rng(refs):
    uris, _ = refs
    train = Digits().dataset(uris, train=True)
    torch.manual_seed(1)
    first = [train[i] for i in range(8)]
    torch.manual_seed(1)
    again = [train[i] for i in range(8)]
    assert all(torch.equal(a, b) for a, b in zip(first, again))  # a resumed run draws the same changes
    plain = Digits().dataset(uris, train=False)
    assert any(not torch.equal(a, plain[i]) for i, a in enumerate(first))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with a driver")
def test_the_cnn_trains_with_fp16_amp_on_cuda(tmp_path, mlflow_template):
    import mlflow

    from tests.trainer.conftest import make_config
    plan = DigitsPlan.fast()
    training = {**settings(tmp_path, 8470, plan)["training"], "device": "cuda", "amp": "fp16", "threads": 0}
    cfg = make_config(tmp_path / "home", mlflow_template, model=MODEL, training=training)
    index = data.write_digits(tmp_path / "digits", seed=plan.seed)
    base = train_baseline(cfg, tmp_path / "digits", index, plan.seed)
    assert base.metrics["accuracy"] >= 0.9, base.metrics
    params = mlflow.MlflowClient(cfg.tracking_uri).get_run(base.run_id).data.params
    assert params["loop.amp"] == "fp16" and params["loop.device"] == "cuda", params


def test_the_examples_configuration_loads():
    from pathlib import Path

    from monitor.config import load_config
    cfg = load_config(Path(__file__).resolve().parents[2] / "examples" / "digits" / "driftloop.yaml", environ={})
    assert cfg.training.entrypoint == "examples.digits.model:Digits" and cfg.model.embedding_dim("image_emb") == 32
