"""The rows behind an embedding drift (monitor/drift/drifted_rows.py): a moved cluster's rows are the
ones listed, they form one cluster, a stationary window lists none, and the result stays bounded."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from monitor.config import load_config
from monitor.drift import DriftEvaluator
from monitor.drift.drifted_rows import MAX_CLUSTERS, MAX_ROWS, cluster_labels, knn_distance
from monitor.drift.summary import MAX_BYTES, summary_html
from monitor.embeddings import column

DIM, LATENT, GROUPS = 64, 8, 4
LOADING = np.random.default_rng(7).normal(size=(DIM, LATENT)) * 0.4
CENTRES = np.random.default_rng(11).normal(size=(GROUPS, LATENT)) * 2.0
MOVE = np.random.default_rng(5).normal(size=LATENT)
MOVE *= 3.5 / np.linalg.norm(MOVE)


def vectors(n: int, seed: int, moved_group: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Embedding-like rows from four groups in a latent space; ``moved_group``'s rows are moved
    by 3.5 sd (one cluster of the inputs changed: a new camera for one kind of image). Returns the
    vectors and which rows were moved."""
    rng = np.random.default_rng(seed)
    group = rng.integers(0, GROUPS, size=n)
    z = rng.normal(size=(n, LATENT)) + CENTRES[group]
    moved = group == moved_group
    z[moved] += MOVE
    return (z @ LOADING.T + 0.3 * rng.normal(size=(n, DIM))).astype(np.float32), moved


def frame(n: int, seed: int, moved_group: int | None = None) -> tuple[pd.DataFrame, np.ndarray]:
    """A store-like window: id, ts, the embedding, score, prediction, label and input_uri."""
    block, moved = vectors(n, seed, moved_group)
    rng = np.random.default_rng(seed + 1)
    score = rng.uniform(size=n)
    out = pd.DataFrame({
        "id": [f"r{seed}-{i}" for i in range(n)],
        "ts": pd.to_datetime(1_700_000_000 + np.arange(n), unit="s", utc=True),
        "x0": rng.normal(size=n),
        "emb": column(block),
        "score": score,
        "prediction": pd.array((score >= 0.5).astype(int), dtype="Int64"),
        "label": pd.array(rng.integers(0, 2, size=n), dtype="Int64"),
        "input_uri": [f"images/{seed}/{i}.png" for i in range(n)],
    })
    return out, moved


@pytest.fixture(scope="module")
def cfg():
    return load_config(path=None, environ={}, overrides={
        "home": "unused", "model": {"features": [{"name": "x0", "type": "numeric"},
                                                 {"name": "emb", "type": "embedding", "dim": DIM}]},
        "drift": {"embedding_sample_rows": 1000}})


@pytest.fixture(scope="module")
def checked(cfg):
    ref, _ = frame(3000, seed=1)
    evaluate = DriftEvaluator()
    window, moved = frame(1500, seed=2, moved_group=2)
    quiet, _ = frame(1500, seed=3)
    return (evaluate(ref, window, cfg.model, cfg.drift, {}), moved, window,
            evaluate(ref, quiet, cfg.model, cfg.drift, {}))


def test_the_listed_rows_are_the_moved_clusters_and_form_one_cluster(checked):
    result, moved, window, _ = checked
    assert result.feature("emb").drifted is True
    [found] = result.drifted_rows
    assert found.feature == "emb" and len(found.rows) == MAX_ROWS
    moved_ids = set(window["id"][moved])
    listed = [r.id for r in found.rows]
    precision = sum(i in moved_ids for i in listed) / len(listed)
    assert precision >= 0.8
    # Far more rows lie beyond the bar than the 1 % a stationary window would put there.
    assert found.atypical_rows > 5 * found.tail * found.scored_rows
    # The moved rows form one cluster: the largest, holding most of them.
    assert 1 <= len(found.clusters) <= MAX_CLUSTERS
    biggest = found.clusters[0]
    in_biggest = [r.id for r in found.rows if r.cluster == biggest.cluster]
    assert biggest.size == len(in_biggest) >= 0.8 * len(listed)
    assert sum(i in moved_ids for i in in_biggest) / len(in_biggest) >= 0.9
    assert set(biggest.examples) <= set(in_biggest) and biggest.centroid_distance > found.threshold
    # Each row carries what export-samples and a person need.
    row = found.rows[0]
    by_id = window.set_index("id").loc[row.id]
    assert row.input_uri == by_id["input_uri"] and row.ts == by_id["ts"].timestamp()
    assert row.score == pytest.approx(by_id["score"]) and row.prediction == int(by_id["prediction"])
    assert [r.distance for r in found.rows] == sorted((r.distance for r in found.rows), reverse=True)
    assert "emb" in found.describe()


def test_a_stationary_window_lists_no_rows(checked):
    _, _, _, quiet = checked
    assert quiet.feature("emb").drifted is False
    assert quiet.drifted_rows == []
    assert quiet.to_dict()["drifted_rows"] == []


def test_the_json_and_the_summary_page_carry_them_bounded(checked):
    result = checked[0]
    body = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    [block] = body["drifted_rows"]
    assert block["method"] == "knn_distance" and len(block["rows"]) == MAX_ROWS
    assert set(block["rows"][0]) == {"id", "ts", "distance", "cluster", "score", "prediction", "input_uri"}
    assert {"cluster", "size", "centroid_distance", "mean_distance", "examples"} == set(block["clusters"][0])
    page = summary_html(result)
    assert "Rows behind the drift of emb" in page and block["rows"][0]["id"] in page
    assert "<script" not in page and len(page.encode()) < MAX_BYTES


def test_knn_distance_skips_the_row_itself_and_matches_brute_force():
    rng = np.random.default_rng(0)
    ref, rows = rng.normal(size=(300, 5)), rng.normal(size=(70, 5))
    brute = np.sort(np.linalg.norm(rows[:, None, :] - ref[None, :, :], axis=2), axis=1)[:, 2]
    assert np.allclose(knn_distance(rows, ref, 3), brute)
    own = np.sort(np.linalg.norm(ref[:, None, :] - ref[None, :, :], axis=2), axis=1)[:, 3]  # [:, 0] is itself
    assert np.allclose(knn_distance(ref, ref, 3, exclude_self=True), own)


def test_clusters_split_only_on_real_structure():
    rng = np.random.default_rng(1)
    two = np.vstack([rng.normal(size=(30, 4)), rng.normal(size=(15, 4)) + 8.0])
    labels = cluster_labels(two)
    assert sorted(np.bincount(labels)) == [15, 30] and labels[0] == 0   # renumbered: the largest is 0
    assert set(cluster_labels(rng.normal(size=(40, 4)))) == {0}            # one blob: one cluster
    assert list(cluster_labels(rng.normal(size=(3, 4)))) == [0, 0, 0]
    assert set(cluster_labels(np.zeros((12, 4)))) == {0}                    # one repeated row: no split
