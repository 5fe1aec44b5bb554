"""training.entrypoint with token ids (tests/trainer/entry_text.py): inputs declared with
``input_spec`` and batched by the user's ``collate`` train, score, and export to ONNX and INT8 with
parity, for an ``EmbeddingBag`` over ids and offsets and a padded-sequence model whose length
varies per batch; the network, its embedding and its declarations are checked against the config
when training starts."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from monitor.errors import ConfigError
from tests.trainer.conftest import make_config
from tests.trainer.entry_text import DIM, write_texts
from trainer.entrypoint import build_entrypoint_model, checked_rows
from trainer.loop import LoopConfig, fit

CLASSES = ["neg", "pos"]


def text_config(home, spec, task="binary", classes=CLASSES, dim=DIM, template=None, **training):
    return make_config(home, template, model={
        "task": task, "classes": classes, "target": "label",
        "features": [{"name": "text", "type": "embedding", "dim": dim}], "input_roots": [str(home.parent)]},
        training={"entrypoint": spec, "epochs": 3, "learning_rate": 0.05, "batch_size": 16,
                  "export": {"onnx": False}, "try_previous_versions": 0, "reference_sample": 100, **training})


def trained(tmp_path, spec, dim=DIM):
    cfg = text_config(tmp_path / "home", spec, dim=dim)
    frame = checked_rows(cfg, write_texts(tmp_path / "txt", count=160), what="rows")
    model = build_entrypoint_model(cfg, frame)
    result = fit(model, model.training_data(frame, "label", True), model.training_data(frame, "label", False),
                 LoopConfig(epochs=3, batch_size=16, learning_rate=0.05, progress=False))
    return cfg, frame, model, result


@pytest.mark.parametrize("spec, dim", [("tests.trainer.entry_text:BagText", DIM),
                                       ("tests.trainer.entry_text:PaddedText", DIM),
                                       ("examples.text.network:TopicBag", 32)])  # the guide's
def test_token_id_models_train_score_and_export_with_parity(tmp_path, spec, dim):
    from trainer.deployment import export_forms
    cfg, frame, model, result = trained(tmp_path, spec, dim)
    assert all(np.isfinite(r["val_loss"]) for r in result.history)
    proba = model.predict_proba(frame)
    assert proba.shape == (160,) and model.embeddings(frame).shape == (160, dim)
    # Batches of 7 rows are padded (offset) otherwise than batches of 256: the same outputs.
    assert np.allclose(model.predict_proba(frame, batch_size=7), proba, atol=1e-6)
    result = export_forms(model, frame.iloc[:100], frame.iloc[100:], cfg)
    assert result.error is None, result.error
    assert result.forms["onnx"].parity < 1e-4
    assert result.forms["onnx-int8"].published and result.forms["onnx-int8"].parity < 0.05  # INT8: the Gemm
    assert "ids: int64" in result.manifest["inputs"]


def test_the_graph_takes_the_declared_inputs_with_dynamic_axes(tmp_path):
    import onnxruntime as ort
    from trainer.entrypoint_export import _trace, _batches
    _, frame, model, _ = trained(tmp_path, "tests.trainer.entry_text:PaddedText")
    session = ort.InferenceSession(_trace(model.eval(), _batches(model, frame.head(4))[0]))
    inputs = {i.name: (i.type, i.shape) for i in session.get_inputs()}
    assert inputs == {"ids": ("tensor(int64)", ["batch", "tokens"]), "mask": ("tensor(bool)", ["batch", "tokens"])}
    ids = torch.tensor([[5, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]])  # longer than any traced text
    out = session.run(None, {"ids": ids.numpy(), "mask": (ids != 0).numpy()})[0]
    with torch.no_grad():
        assert np.allclose(out, model.output(model(ids, ids != 0)).numpy(), atol=1e-6)


def test_an_embedding_bag_model_registers_with_its_onnx_forms_and_serves(tmp_path, mlflow_template):
    """The reported failure: every train of an EmbeddingBag model logged 'ONNX export of v1 not
    published: ... Expected tensor for argument #1 'indices' to have one of the following scalar
    types: Long, Int; but got torch.FloatTensor'."""
    import mlflow.pyfunc
    from mlflow import MlflowClient
    from trainer import registry as reg
    from trainer import train_baseline
    cfg = text_config(tmp_path / "home", "tests.trainer.entry_text:BagText", template=mlflow_template,
                      export={"onnx": True}, min_rows=50)
    texts = write_texts(tmp_path / "txt", count=200)
    outcome = train_baseline(cfg, texts)
    tags = MlflowClient(cfg.tracking_uri).get_run(outcome.run_id).data.tags
    assert "driftloop.export.error" not in tags and tags["driftloop.export.onnx"] == "published"
    with reg.session(cfg):
        registry = reg.Registry(cfg)
        model = mlflow.pyfunc.load_model(registry.client.get_model_version_download_uri(registry.name, "1"))
    out = model.predict(texts[["input_uri"]].head(20))
    assert len(out) == 20 and all(len(v) == DIM for v in out["text"])


@pytest.mark.parametrize("spec, config, key, words", [
    ("tests.trainer.entry_text:WideEmbedding", {}, "model.features", f"has dim {DIM}, .* returns {2 * DIM} values"),
    ("tests.trainer.entry_text:ThreeOutputs", {"task": "multiclass", "classes": ["a", "b", "c", "d"]},
     "model.classes", r"must return \[N, 4\], got \[2, 3\]"),
    ("tests.trainer.entry_text:ThreeOutputs", {}, "model.task", r"must return \[N\] or \[N, 1\], got \[2, 3\]"),
    ("tests.trainer.entry_text:FloatIds", {}, "input_spec 'ids'", r"declares float32\[batch, tokens\], .* yield int64"),
])
def test_the_model_is_checked_against_the_config_when_training_starts(tmp_path, spec, config, key, words):
    """One ConfigError naming the key, expected and got, before any training (not a 422 at the
    first logged batch)."""
    cfg = text_config(tmp_path / "home", spec, **config)
    frame = write_texts(tmp_path / "txt", count=20)
    if "classes" in config:
        frame["label"] = [config["classes"][i % 4] for i in range(20)]
    frame = checked_rows(cfg, frame, what="rows")
    with pytest.raises(ConfigError, match=words) as err:
        build_entrypoint_model(cfg, frame)
    assert key in str(err.value)


def test_an_unreadable_declaration_is_a_config_error(tmp_path, monkeypatch):
    from tests.trainer import entry_text
    from trainer.entrypoint import load_entrypoint
    monkeypatch.setattr(entry_text.BagText, "input_spec", [{"name": "ids", "dtype": "int65"}])
    with pytest.raises(ConfigError, match="'int65' is not a torch dtype"):
        load_entrypoint("tests.trainer.entry_text:BagText")


def test_a_champion_is_checked_against_todays_config_without_touching_the_rng(tmp_path):
    """A retrain's warm start runs the same check (trainer/retraining.py): the config's dim changed
    since the champion was trained. A check that passes leaves torch's RNG as it was (a resumed run
    stays bit-identical)."""
    from trainer.entrypoint import check_model
    cfg, frame, champion, _ = trained(tmp_path, "tests.trainer.entry_text:BagText")
    state = torch.get_rng_state()
    check_model(cfg, champion, frame)
    assert torch.equal(torch.get_rng_state(), state)
    with pytest.raises(ConfigError, match=f"model.features: .* has dim 16, .* returns {DIM} values"):
        check_model(text_config(tmp_path / "later", "tests.trainer.entry_text:BagText", dim=16), champion, frame)
