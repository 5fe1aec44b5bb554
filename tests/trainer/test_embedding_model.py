"""driftloop's own MLP on embedding features: a vector becomes dim standardised inputs (a missing
vector zeros plus one indicator); training, predict_proba, the pyfunc, the ONNX export and the
torch-free ONNX scorer agree."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from monitor.embeddings import column
from monitor.onnx_scoring import OnnxScorer
from tests.trainer.conftest import make_config
from trainer.build import build_model
from trainer.export import features_of, to_onnx
from trainer.loop import LoopConfig
from trainer.metrics import accuracy
from trainer.pyfunc import TabularPyfunc
from trainer.runs import fit_frames

DIM = 16
FP32_TOLERANCE = 1e-4


def embedded_rows(n: int, seed: int = 0, missing: int = 0) -> pd.DataFrame:
    """A label carried by a direction of the embedding (as a sentence encoder's output would carry
    a topic) and, more weakly, by one number; ``missing`` rows without a vector."""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n, DIM)).astype(np.float32)
    x = rng.normal(size=n)
    logit = 2.5 * vectors[:, 0] - 1.5 * vectors[:, 1] + 0.5 * x
    label = (logit + rng.normal(scale=0.3, size=n) > 0).astype(np.int64)
    emb = column(vectors)
    emb.iloc[:missing] = None
    return pd.DataFrame({"x": x, "emb": emb, "label": label})


@pytest.fixture
def cfg(tmp_path):
    return make_config(tmp_path / "home", model={"name": "m", "features": [
        {"name": "x"}, {"name": "emb", "type": "embedding", "dim": DIM}]}, training={"epochs": 15})


def trained(cfg, rows: pd.DataFrame, tmp_path):
    model = build_model(cfg, rows)
    fit_frames(model, rows.iloc[:800], rows.iloc[800:1000], "label", LoopConfig.from_training(cfg.training),
               checkpoint_path=tmp_path / "ckpt.pt", resume=False)
    return model.eval()


def test_the_mlp_learns_from_an_embedding_and_onnx_agrees(cfg, tmp_path):
    rows = embedded_rows(1400, missing=40)
    model = trained(cfg, rows, tmp_path)
    assert model.embeddings == {"emb": DIM}
    assert model.net.blocks[0][0].in_features == 1 + DIM + 1  # x, the vector, the vector's missing indicator
    held_out = rows.iloc[1000:]
    proba = model.predict_proba(held_out)
    assert accuracy(held_out["label"].to_numpy(), (proba > 0.5).astype(int)) > 0.85

    features = features_of(model)
    assert features == [{"name": "x", "type": "numeric"}, {"name": "emb", "type": "embedding", "dim": DIM}]
    scorer = OnnxScorer(to_onnx(model, rows), {"features": features})
    inputs = {i.name: (i.type, i.shape[1:]) for i in scorer.session.get_inputs()}
    assert inputs == {"x": ("tensor(float)", []), "emb": ("tensor(float)", [DIM])}
    live = held_out.drop(columns="label").copy()
    live.iloc[:5, live.columns.get_loc("emb")] = None  # missing vectors at serving time too
    expected = model.predict_proba(live)
    assert np.max(np.abs(scorer.predict(live) - expected)) < FP32_TOLERANCE
    assert np.max(np.abs(scorer.predict(live.head(1)) - expected[:1])) < FP32_TOLERANCE
    # Lists instead of arrays (a frame read from JSON) score the same.
    as_lists = live.assign(emb=[None if v is None else v.tolist() for v in live["emb"]])
    assert np.max(np.abs(scorer.predict(as_lists) - expected)) < FP32_TOLERANCE
    assert np.allclose(TabularPyfunc(model, "prediction").predict(None, live), expected, atol=1e-6)


def test_a_missing_vector_is_the_training_mean(cfg, tmp_path):
    rows = embedded_rows(300, missing=30)
    model = build_model(cfg, rows)
    x_num, _ = model.encode(rows.head(40))
    assert x_num.shape == (40, 1 + DIM)
    assert bool(x_num[:30, 1:].isnan().all()) and not bool(x_num[30:].isnan().any())
    # Standardised over the present vectors only.
    present = np.stack(rows["emb"].iloc[30:].to_list())
    assert np.allclose(model.mean[1:].numpy(), present.mean(axis=0), atol=1e-5)


def test_a_vector_of_another_length_is_refused_naming_the_feature(cfg):
    rows = embedded_rows(100)
    model = build_model(cfg, rows)
    bad = rows.copy()
    bad.at[bad.index[3], "emb"] = np.zeros(DIM - 1, dtype=np.float32)
    with pytest.raises(ValueError, match="'emb': row 3"):
        model.predict_proba(bad)


def test_a_registered_version_records_the_embedding_with_its_dim(tmp_path, mlflow_template):
    """The version's schema tag keeps the vector's length (serve, check and retrain rebuild the
    features from it when none are configured) and its pyfunc scores vectors sent as lists."""
    from monitor.dataschema import feature_spec
    from trainer import load_champion, train_baseline
    from trainer.schema_check import champion_schema
    cfg = make_config(tmp_path / "home", mlflow_template, model={"name": "m", "features": [
        {"name": "x"}, {"name": "emb", "type": "embedding", "dim": DIM}]}, training={"epochs": 5})
    train_baseline(cfg, embedded_rows(1200))
    version, _, recorded = champion_schema(cfg)
    assert version == "1" and recorded is not None
    features, columns = recorded
    assert features == {"x": "numeric", "emb": {"type": "embedding", "dim": DIM}}
    assert [feature_spec(n, e) for n, e in features.items()] == list(cfg.model.features)
    live = embedded_rows(50, seed=3).drop(columns="label")
    as_lists = live.assign(emb=[v.tolist() for v in live["emb"]])
    champion = load_champion(cfg)
    assert np.allclose(champion.predict_proba(as_lists), champion.predict_proba(live), atol=1e-6)
