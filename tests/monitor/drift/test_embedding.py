"""Embedding drift (monitor/drift/embedding.py): the tests on vectors, and an embedding feature
through the whole check (frames built per the frame contract: one object column of float32 arrays)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from monitor.config import load_config
from monitor.drift import DriftEvaluator, evaluate_window
from monitor.drift.embedding import prepare_block, sampled_matrix, check_block
from monitor.drift.embedding_methods import METHODS
from monitor.embeddings import column
from monitor.errors import DataError
from tests.monitor.drift.conftest import score_frame
from tests.monitor.drift.test_metrics import promtool_check, samples, scrape
from trainer.synthetic import make_dataset

DIM, LATENT = 96, 8
LOADING = np.random.default_rng(7).normal(size=(DIM, LATENT)) * 0.4


def vectors(n: int, seed: int, shift: float = 0.0) -> np.ndarray:
    """Embedding-like rows: a few latent factors plus noise; ``shift`` moves the first factor's mean (in sd)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, LATENT))
    z[:, 0] += shift
    return (z @ LOADING.T + 0.3 * rng.normal(size=(n, DIM))).astype(np.float32)


def check(ref: np.ndarray, cur: np.ndarray, method: str, *, cap: int = 1000, seed: int = 0):
    prepared = prepare_block(ref, sample_rows=cap, components=16, seed=seed)
    assert not isinstance(prepared, str)
    out = check_block("e", prepared, cur, method=method, threshold=None, sample_rows=cap, seed=seed)
    assert not isinstance(out, str)
    return out


@pytest.mark.parametrize("method", METHODS)
def test_two_samples_of_one_distribution_do_not_drift(method):
    out = check(vectors(1600, seed=1), vectors(800, seed=2), method)
    assert out.drifted is False
    assert out.method == method


@pytest.mark.parametrize("method", ["mmd", "classifier", "components"])
def test_a_clear_shift_drifts(method):
    out = check(vectors(1600, seed=1), vectors(800, seed=3, shift=1.0), method)
    assert out.drifted is True


def test_reconstruction_sees_a_shift_off_the_reference_components():
    # NannyML's method is blind to moves within the principal subspace; it sees new directions.
    cur = vectors(800, seed=3)
    cur[:, 0] += 1.5
    assert check(vectors(1600, seed=1), cur, "reconstruction").drifted is True


def test_rows_used_are_capped_and_the_projection_is_fitted_on_other_rows():
    ref = vectors(5000, seed=1)
    prepared = prepare_block(ref, sample_rows=300, components=16, seed=0)
    assert not isinstance(prepared, str)
    assert prepared.fit_rows == 300 and len(prepared.projected) == 300
    assert prepared.components.shape == (16, DIM)
    out = check_block("e", prepared, vectors(4000, seed=2), method="mmd", threshold=None, sample_rows=300, seed=0)
    assert not isinstance(out, str)
    assert (out.reference_rows, out.current_rows, out.components) == (300, 300, 16)
    # A small reference splits in halves: fit on one, test against the other.
    small = prepare_block(vectors(101, seed=1), sample_rows=300, components=16, seed=0)
    assert not isinstance(small, str)
    assert small.fit_rows == 50 and len(small.projected) == 51


def test_same_seed_same_verdict_and_missing_rows_are_left_out():
    ref, cur = vectors(1200, seed=1), vectors(600, seed=4, shift=0.3)
    cur[::7] = np.nan  # rows without a vector
    a, b = check(ref, cur, "mmd"), check(ref, cur, "mmd")
    assert (a.score, a.statistic, a.current_rows) == (b.score, b.statistic, b.current_rows)
    assert a.current_rows == 600 - len(range(0, 600, 7))


def test_too_few_vectors_is_a_reason_not_an_error():
    assert isinstance(prepare_block(vectors(30, seed=1), sample_rows=100, components=8, seed=0), str)
    prepared = prepare_block(vectors(400, seed=1), sample_rows=100, components=8, seed=0)
    assert not isinstance(prepared, str)
    assert isinstance(check_block("e", prepared, vectors(5, seed=2), method="mmd", threshold=None, sample_rows=100,
                                 seed=0), str)


def test_sampled_matrix_names_the_row_of_a_bad_vector():
    values = column(vectors(10, seed=1))
    values.iloc[6] = np.ones(3, dtype=np.float32)
    with pytest.raises(DataError, match=r"window column 'emb'.*96 numbers; row 6 holds 3 values"):
        sampled_matrix(values, DIM, 100, np.random.default_rng(0), side="current window", name="emb")


# ---------------------------------------------------------------- through the check

@pytest.fixture(scope="module")
def emb_cfg():
    features = [{"name": "x0", "type": "numeric"}, {"name": "x1", "type": "numeric"},
                {"name": "region", "type": "categorical"}, {"name": "emb", "type": "embedding", "dim": DIM}]
    return load_config(path=None, environ={}, overrides={
        "home": "unused", "model": {"features": features, "segments": ["region"]},
        "drift": {"embedding_sample_rows": 600, "segment_min_labels": 30}})


def frame(n: int, seed: int, shift: float = 0.0, labelled: bool = True) -> pd.DataFrame:
    """A store-like frame: the demo's x0, x1, region, score and label, and an embedding column."""
    out = score_frame(make_dataset(n, seed=seed))[["x0", "x1", "x5", "region", "label", "score", "prediction"]]
    out["emb"] = column(vectors(n, seed=seed + 100, shift=shift))
    if not labelled:
        out["label"] = pd.array([pd.NA] * n, dtype="Int64")
    return out


def test_embedding_feature_through_the_check_counts_once_in_the_drift_share(emb_cfg):
    ref = frame(3000, seed=1)
    evaluate = DriftEvaluator()
    quiet = evaluate(ref, frame(1500, seed=2), emb_cfg.model, emb_cfg.drift, {"accuracy": 0.8})
    moved = evaluate(ref, frame(1500, seed=3, shift=1.0), emb_cfg.model, emb_cfg.drift, {"accuracy": 0.8})
    assert evaluate.misses == 1 and evaluate.hits == 1   # the projection is fitted once per reference
    assert [f.name for f in quiet.features] == ["x0", "x1", "region", "emb"]
    emb = moved.feature("emb")
    assert (emb.method, emb.threshold, emb.drifted) == ("mmd", 0.05, True)
    assert quiet.feature("emb").drifted is False
    assert emb.details is not None and emb.details["current_rows"] == 600 and emb.details["reference_rows"] == 600
    assert moved.drifted_features == ["emb"] and moved.drift_share == pytest.approx(1 / 4)
    # JSON (check --json, /v1/status, the report's driftloop part) carries it like any feature.
    body = json.loads(json.dumps(moved.to_dict(), allow_nan=False))
    entry = next(f for f in body["features"] if f["name"] == "emb")
    assert entry["drifted"] is True and entry["method"] == "mmd" and entry["details"]["components"] == 32
    # Segments bin the tabular features only; the embedding column stays out of Evidently's frames.
    assert moved.segments and all(s.segment == "region" for s in moved.segments)
    assert "emb" not in moved.snapshot.dict()["metrics"].__repr__()


def test_a_model_whose_only_feature_is_an_embedding(emb_cfg):
    cfg = load_config(path=None, environ={}, overrides={
        "home": "unused", "model": {"features": [{"name": "emb", "type": "embedding", "dim": DIM}]},
        "drift": {"embedding_method": "classifier"}})
    result = evaluate_window(frame(1000, seed=1), frame(800, seed=5, shift=1.0, labelled=False), cfg.model, cfg.drift,
                             {})
    assert [f.name for f in result.features] == ["emb"]
    assert result.feature("emb").method == "classifier" and result.dataset_drift is True
    assert result.snapshot is not None   # prediction drift still runs in Evidently


def test_an_embedding_without_vectors_in_the_window_is_drifted_by_its_missing_share_not_an_error(emb_cfg):
    cur = frame(500, seed=2)
    cur["emb"] = pd.Series([None] * len(cur), dtype=object)
    result = evaluate_window(frame(1000, seed=1), cur, emb_cfg.model, emb_cfg.drift, {})
    emb = result.feature("emb")
    assert emb.drifted and emb.method == "missing_share" and emb.score == pytest.approx(1.0)
    assert emb.details["values"]["skipped"] is not None  # its vector test had nothing to test
    assert result.drift_share == pytest.approx(sum(f.drifted for f in result.features) / len(result.features))
    # With the missing-share verdict off, the vector test's skip stands.
    off = emb_cfg.drift.model_copy(update={"missing_share_change": 0.0})
    skipped = evaluate_window(frame(1000, seed=1), cur, emb_cfg.model, off, {}).feature("emb")
    assert skipped.skipped is not None and skipped.score is None and not skipped.drifted


def test_prometheus_series_of_an_embedding_feature(emb_cfg):
    result = evaluate_window(frame(1000, seed=1), frame(800, seed=3, shift=1.0), emb_cfg.model, emb_cfg.drift, {})
    text = scrape(lambda: result)
    promtool_check(text)
    got = samples(text)
    labels = (("feature", "emb"), ("method", "mmd"), ("model", "demo"))
    assert got[("driftloop_model_feature_drift_score", labels)] == pytest.approx(result.feature("emb").score)
    assert got[("driftloop_model_feature_drift_threshold", labels)] == 0.05
    assert got[("driftloop_model_feature_drifted", (("feature", "emb"), ("model", "demo")))] == 1


def test_a_window_read_from_the_store_through_the_check(tmp_path, emb_cfg):
    """Vectors sent as lists, stored as float32 BLOBs, read back by the store's window, then checked."""
    from monitor.store import PredictionStore
    from tests.monitor.store.conftest import Clock
    from tests.monitor.store.factories import T0

    cur = frame(600, seed=3, shift=1.0)
    records = [{"id": f"r{i}", "ts": T0 + i, "score": float(cur["score"].iloc[i]),
                "features": {"x0": float(cur["x0"].iloc[i]), "x1": float(cur["x1"].iloc[i]),
                             "region": cur["region"].iloc[i], "emb": cur["emb"].iloc[i].tolist()}}
               for i in range(len(cur))]
    with PredictionStore(f"sqlite:///{tmp_path / 'store.db'}", emb_cfg.model, clock=Clock()) as store:
        assert store.add_predictions(records).stored == 600
        window = store.window()
    result = evaluate_window(frame(1500, seed=1), window, emb_cfg.model, emb_cfg.drift, {})
    emb = result.feature("emb")
    assert emb.drifted is True and emb.details is not None and emb.details["current_rows"] == 600
