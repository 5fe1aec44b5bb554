"""Artifacts with the model (training.entrypoint's ``prepare_artifacts``): the text example's
vocabulary (examples/text/network.py) travels with every registered version, grows on a retrain
with old ids kept, and scores through the registered model; a pretrained backbone's weights
(tests/trainer/entry_backbone.py) ship as an artifact, stay frozen, and the head trains at its own
learning rate (``param_groups``); a model without artifacts trains and loads as before."""
from __future__ import annotations

import gc
from pathlib import Path

import cloudpickle
import numpy as np
import pandas as pd
import pytest
import torch

from examples.text.corpus import CLASSES as TOPICS, corpus
from examples.text.network import Vocabulary
from monitor.errors import ConfigError
from tests.trainer import entry_backbone
from tests.trainer.conftest import make_config
from tests.trainer.entry_digits import write_digits
from tests.trainer.entry_text import write_texts
from trainer import registry as reg
from trainer.entrypoint import build_entrypoint_model, checked_rows, load_grown, warm_start
from trainer.loop import LoopConfig, copy_model, fit
from trainer.pyfunc import TabularPyfunc, pickled_by_value

TEXT = "examples.text.network:TopicBag"
DIGITS = [str(i) for i in range(10)]


def write_messages(directory: Path, messages: pd.DataFrame) -> pd.DataFrame:
    """Each message of examples.text.corpus as a text file: ``request_id``, ``input_uri``, ``label``."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = []
    for rid, text, label in messages[["request_id", "text", "label"]].itertuples(index=False):
        (directory / f"{rid}.txt").write_text(text)
        rows.append({"request_id": rid, "input_uri": str(directory / f"{rid}.txt"), "label": label})
    return pd.DataFrame(rows)


def topics_config(home: Path, template: Path | None = None, **training):
    return make_config(home, template, model={
        "task": "multiclass", "classes": TOPICS, "target": "label", "id": "request_id",
        "features": [{"name": "text_emb", "type": "embedding", "dim": 32}], "input_roots": [str(home.parent)]},
        training={"entrypoint": TEXT, "epochs": 2, "retrain_epochs": 2, "learning_rate": 0.05, "batch_size": 32,
                  "min_rows": 50, "export": {"onnx": False}, "try_previous_versions": 0, "reference_sample": 100,
                  "cold_start": "never", **training})


def vocabulary(model) -> Vocabulary:
    return Vocabulary.read(model.artifacts.folder)


# -- the text example: a vocabulary that travels and grows ------------------------------------------

@pytest.fixture(scope="module")
def topics(tmp_path_factory, mlflow_template):
    """v1 trained on messages of the old vocabulary, v2 retrained on messages of the new one."""
    from trainer import retrain, train_baseline
    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("topics")
    cfg = topics_config(tmp / "home", mlflow_template)
    train_baseline(cfg, write_messages(tmp / "msg", corpus(240, seed=1)))
    result = retrain(cfg, write_messages(tmp / "msg", corpus(200, seed=2, shift=1.0)))
    with reg.session(cfg):
        registry = reg.Registry(cfg)
        v1, v2 = (reg.load_version(cfg, registry, v).model for v in ("1", result.challenger_version))
        uris = {v: registry.client.get_model_version_download_uri(registry.name, v)
                for v in ("1", result.challenger_version)}
    return cfg, tmp, v1, v2, uris


def test_the_registered_version_carries_its_vocabulary(topics):
    from urllib.parse import urlparse
    from mlflow.models import Model
    _, _, v1, _, uris = topics
    words = vocabulary(v1).words
    assert "invoice" in words and "chargeback" not in words
    assert v1.net.bag.weight.shape[0] == len(words) + 1  # built on it: one row per id, 0 for unknown words
    listed = Model.load(urlparse(uris["1"]).path).metadata["entrypoint_artifacts"]  # the MLmodel file
    assert [a["path"] for a in listed] == ["vocabulary.json"] and listed[0]["bytes"] > 0


def test_a_retrain_grows_the_vocabulary_and_keeps_old_ids(topics):
    _, _, v1, v2, _ = topics
    old, new = vocabulary(v1).words, vocabulary(v2).words
    assert new[:len(old)] == old  # appended only: an old word keeps its id
    assert {"chargeback", "locker", "passkey", "earbuds"} <= set(new[len(old):])
    assert v2.net.bag.weight.shape[0] == len(new) + 1


def test_scoring_through_the_registered_model_uses_its_vocabulary(topics):
    """A message of one new word: v2's embedding is that word's row, v1's the unknown word's (0)."""
    import mlflow.pyfunc
    from monitor.client import Champion
    cfg, tmp, v1, v2, uris = topics
    (tmp / "one.txt").write_text("chargeback")
    rows = pd.DataFrame({"request_id": ["q1"], "input_uri": [str(tmp / "one.txt")]})
    v2_version = next(v for v in uris if v != "1")
    for version, model, row in (("1", v1, 0), (v2_version, v2, vocabulary(v2).index["chargeback"])):
        out = mlflow.pyfunc.load_model(uris[version]).predict(rows)
        np.testing.assert_allclose(out["text_emb"][0], model.net.bag.weight[row].detach().numpy(), atol=1e-6)
    with Champion(cfg.tracking_uri, cfg.registered_model_name, interval=3600) as champion:
        version, out = champion.score(rows)  # a service's scoring: whichever version is champion
    model, vocab = (v1, vocabulary(v1)) if version == "1" else (v2, vocabulary(v2))
    row = vocab.index.get("chargeback", 0)
    np.testing.assert_allclose(out["text_emb"][0], model.net.bag.weight[row].detach().numpy(), atol=1e-6)


def test_a_warm_start_builds_on_the_grown_vocabulary_from_the_champions_weights(tmp_path):
    cfg = topics_config(tmp_path / "home")
    old = checked_rows(cfg, write_messages(tmp_path / "msg", corpus(60, seed=1)), what="rows")
    champion = build_entrypoint_model(cfg, old)
    champion_files = champion.artifacts.files()
    new = checked_rows(cfg, write_messages(tmp_path / "msg", corpus(60, seed=2, shift=1.0)), what="rows")
    warm = warm_start(cfg, copy_model(champion), new)
    n = champion.net.bag.weight.shape[0]
    assert warm.net.bag.weight.shape[0] > n
    assert torch.equal(warm.net.bag.weight[:n], champion.net.bag.weight)  # old ids: the champion's rows
    assert torch.equal(warm.net.head.weight, champion.net.head.weight)
    assert vocabulary(warm).words[:n - 1] == vocabulary(champion).words
    assert champion.artifacts.files() == champion_files  # prepare_artifacts got a copy of `previous`
    assert warm.artifacts.folder != champion.artifacts.folder


def test_a_network_that_shrinks_does_not_take_the_champions_weights():
    small, large = torch.nn.Embedding(3, 2), torch.nn.Embedding(5, 2)
    assert load_grown(large, small.state_dict()) == ["weight"]
    with pytest.raises(ValueError, match=r"weight \[5, 2\] -> \[3, 2\]"):
        load_grown(small, large.state_dict())


def test_artifacts_travel_in_the_pickle_and_leave_with_the_model(tmp_path):
    cfg = topics_config(tmp_path / "home")
    rows = checked_rows(cfg, write_messages(tmp_path / "msg", corpus(40, seed=1)), what="rows")
    model = build_entrypoint_model(cfg, rows).eval()
    with pickled_by_value(model):
        data = cloudpickle.dumps(TabularPyfunc(model))
    loaded = cloudpickle.loads(data).model
    folder = loaded.artifacts.folder
    assert folder != model.artifacts.folder and loaded.artifacts.files() == model.artifacts.files()
    np.testing.assert_allclose(loaded.predict_proba(rows), model.predict_proba(rows), atol=1e-6)
    del loaded
    gc.collect()
    assert not folder.exists()


# -- models without artifacts ---------------------------------------------------------------------------

def test_a_model_without_artifacts_trains_and_loads_as_before(tmp_path):
    cfg = make_config(tmp_path / "home", model={
        "task": "binary", "classes": ["neg", "pos"], "target": "label",
        "features": [{"name": "text", "type": "embedding", "dim": 8}], "input_roots": [str(tmp_path)]},
        training={"entrypoint": "tests.trainer.entry_text:BagText"})
    rows = checked_rows(cfg, write_texts(tmp_path / "txt", count=60), what="rows")
    model = build_entrypoint_model(cfg, rows)
    fit(model, model.training_data(rows, "label", True), model.training_data(rows, "label", False),
        LoopConfig(epochs=1, batch_size=16, learning_rate=0.05, progress=False))
    assert model.artifacts is None
    with pickled_by_value(model):
        loaded = cloudpickle.loads(cloudpickle.dumps(TabularPyfunc(model.eval()))).model
    np.testing.assert_allclose(loaded.predict_proba(rows), model.predict_proba(rows), atol=1e-6)
    fn, args = model.__reduce__()
    before = fn(*args[:7])  # what a model pickled before artifacts existed hands to restore
    np.testing.assert_allclose(before.predict_proba(rows), model.predict_proba(rows), atol=1e-6)
    assert warm_start(cfg, copy_model(model), rows).artifacts is None


# -- a pretrained backbone: shipped weights, frozen, a head learning rate --------------------------------

def backbone_config(home: Path, template: Path | None = None, spec: str = "Pretrained"):
    return make_config(home, template, model={
        "task": "multiclass", "classes": DIGITS, "target": "label",
        "features": [{"name": "cnn", "type": "embedding", "dim": entry_backbone.FEATURES}],
        "input_roots": [str(home.parent)]},
        training={"entrypoint": f"tests.trainer.entry_backbone:{spec}", "epochs": 2, "learning_rate": 0.01,
                  "batch_size": 32, "min_rows": 50, "export": {"onnx": False}, "try_previous_versions": 0,
                  "reference_sample": 100})


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    path = tmp_path / "package" / entry_backbone.WEIGHTS
    path.parent.mkdir()
    weights = entry_backbone.pretrained_weights(path)
    monkeypatch.setattr(entry_backbone, "shipped", path)
    return path, weights


def test_a_frozen_backbone_ships_its_weights_and_only_the_head_trains(tmp_path, mlflow_template, shipped,
                                                                      monkeypatch):
    from trainer import train_baseline
    path, pretrained = shipped
    groups: list[list[tuple[float, int]]] = []

    class Recording(torch.optim.AdamW):
        def __init__(self, params, **kwargs):
            super().__init__(params, **kwargs)
            groups.append([(g["lr"], len(g["params"])) for g in self.param_groups])

    monkeypatch.setattr(torch.optim, "AdamW", Recording)
    cfg = backbone_config(tmp_path / "home", mlflow_template)
    images = write_digits(tmp_path / "img", count=200)
    train_baseline(cfg, images)
    assert groups[-1] == [(0.01 * entry_backbone.HEAD_LR_FACTOR, 2)]  # the loop's: the head alone, at its lr

    path.unlink()  # a machine without the package's weights file: the version carries it
    monkeypatch.setattr(entry_backbone, "shipped", None)
    with reg.session(cfg):
        model = reg.load_version(cfg, reg.Registry(cfg), "1").model
    trained = model.net.backbone.state_dict()
    assert all(torch.equal(trained[k], v) for k, v in pretrained.items())  # weights and BatchNorm statistics
    start = build_entrypoint_model(cfg, images.head(4), previous=model.artifacts.folder)  # v1's first weights
    assert not torch.equal(start.net.head.weight, model.net.head.weight)  # the head did train
    rows = checked_rows(cfg, images.head(60), what="rows")
    warm = warm_start(cfg, copy_model(model), rows)  # a retrain: the weights come from the champion's artifacts
    assert torch.equal(warm.net.head.weight, model.net.head.weight)


def test_param_groups_name_the_heads_learning_rate_and_train_the_rest_at_lr(tmp_path, shipped):
    cfg = backbone_config(tmp_path / "home", spec="SlowBackbone")
    model = build_entrypoint_model(cfg, write_digits(tmp_path / "img", count=4))
    first, rest = model.param_groups(0.01)
    assert first["lr"] == pytest.approx(0.001) and len(first["params"]) == 4  # conv and BatchNorm: weight, bias
    assert "lr" not in rest and {id(p) for p in rest["params"]} == {id(p) for p in model.net.head.parameters()}


@pytest.mark.parametrize("spec, words", [("HeadTwice", "more than one"), ("ForeignTensor", "not a parameter")])
def test_param_groups_the_optimizer_cannot_take_are_refused_before_training(tmp_path, shipped, spec, words):
    cfg = backbone_config(tmp_path / "home", spec=spec)
    with pytest.raises(ConfigError, match=f"param_groups.*{words}"):
        build_entrypoint_model(cfg, write_digits(tmp_path / "img", count=4))
