"""What drifted, with the rows behind it: for each *drifted* embedding feature, the window's most
atypical rows and the clusters they form, so a person can look at (and label) the inputs behind a
drift instead of a p-value.

**Atypical.** A row's ``distance`` is its distance to its ``k``-th nearest reference row
(:data:`NEIGHBOURS`) in the feature's principal-component space, the projection the drift test
already fitted on the reference (:class:`monitor.drift.embedding.EmbeddingReference`). The
components are *not* whitened here, unlike in the test: a row's distance is then the embedding's own
Euclidean distance within the principal subspace, where the leading directions weigh most. Whitened,
the many low-variance components' noise hid a moved cluster (top-50 precision 0.58 against 0.94 on
the test's synthetic clusters, a fifth of the rows moved by 3 sd). The bar is the reference's own:
each held-out reference row's distance to its ``k`` nearest *other* reference rows; a window row
is atypical beyond that distribution's ``1 - TAIL`` quantile (the 99th percentile), where 1 % of
the reference's rows lie by chance. Distance catches rows in *new* regions (rotated images, a new
vocabulary); a drift that only changes the proportions of familiar regions has few atypical rows,
and ``atypical_rows`` against ``TAIL`` of ``scored_rows`` says so.

**Bounded.** At most :data:`SCORED_ROWS` rows of the window are scored (a seeded uniform sample of
those holding a vector), in blocks of :data:`BLOCK_ROWS` against at most
``drift.embedding_sample_rows`` reference rows; at most :data:`MAX_ROWS` rows are listed (the
farthest beyond the bar) and grouped into at most :data:`MAX_CLUSTERS` clusters by k-means on their
projected coordinates, ``k`` chosen by the silhouette (one cluster when no split reaches
:data:`MIN_SILHOUETTE`, Kaufman and Rousseeuw's "no substantial structure" bound). Each listed row
carries its id, time, the model's score and prediction, and its ``input_uri``: what
``driftloop export-samples`` writes out for labelling (:mod:`monitor.drift.sample_export`).

Only drifted features are listed: a stationary window's chance exceedances (1 % of its rows) are
noise, not evidence. Plain data in, plain data out; the daemon notes the clusters on the drift
incident and ``GET /v1/status`` summarises them (hiding every ``input_uri`` from untrusted callers).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]  # scikit-learn's own dependency

from monitor.config import ModelConfig
from monitor.drift.embedding import EmbeddingDrift, EmbeddingReference, sampled_block
from monitor.embeddings import INPUT_URI
from monitor.finite import finite

METHOD = "knn_distance"
NEIGHBOURS = 10          # the k of the k-th nearest reference row
TAIL = 0.01              # share of the reference's own rows beyond the bar
SCORED_ROWS = 10_000     # window rows scored at most (a seeded sample beyond)
BLOCK_ROWS = 1024        # rows per distance block: 1024 x 2000 float64 distances = 16 MB
MAX_ROWS = 50            # rows listed per feature: the farthest beyond the bar
MAX_CLUSTERS = 5
MIN_SILHOUETTE = 0.25    # below it, the listed rows are one cluster
MAX_EXAMPLES = 3         # row ids per cluster, nearest its centroid first
MIN_SPLIT_ROWS = 6       # fewer listed rows are one cluster


@dataclass(frozen=True)
class AtypicalRow:
    """One listed window row: ``distance`` to its ``k``-th nearest reference row (module
    docstring), the ``cluster`` it falls in, and what the window frame held for it."""

    id: str | None
    ts: float | None             # epoch seconds
    distance: float
    cluster: int
    score: float | None = None
    prediction: Any = None
    input_uri: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "ts": finite(self.ts), "distance": finite(self.distance), "cluster": int(self.cluster),
                "score": finite(self.score), "prediction": self.prediction, "input_uri": self.input_uri}


@dataclass(frozen=True)
class RowCluster:
    """A group of listed rows: its ``size``, the distance of its centroid to the reference (same
    units as a row's), its rows' mean distance, and up to :data:`MAX_EXAMPLES` row ids."""

    cluster: int
    size: int
    centroid_distance: float
    mean_distance: float
    examples: tuple[str | None, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": int(self.cluster), "size": int(self.size),
                "centroid_distance": finite(self.centroid_distance), "mean_distance": finite(self.mean_distance),
                "examples": list(self.examples)}


@dataclass(frozen=True)
class DriftedRows:
    """The rows behind one drifted embedding feature. ``threshold`` is the bar (the reference's
    ``1 - tail`` quantile of its own distances); ``atypical_rows`` of the ``scored_rows`` lie beyond
    it (``tail`` of them would by chance); ``rows`` lists the farthest of them, largest first."""

    feature: str
    scored_rows: int
    reference_rows: int
    neighbours: int
    threshold: float
    atypical_rows: int
    rows: tuple[AtypicalRow, ...]
    clusters: tuple[RowCluster, ...]
    tail: float = TAIL
    method: str = METHOD

    def to_dict(self) -> dict[str, Any]:
        return {"feature": self.feature, "method": self.method, "neighbours": int(self.neighbours),
                "tail": finite(self.tail), "threshold": finite(self.threshold), "scored_rows": int(self.scored_rows),
                "reference_rows": int(self.reference_rows), "atypical_rows": int(self.atypical_rows),
                "rows": [r.to_dict() for r in self.rows], "clusters": [c.to_dict() for c in self.clusters]}

    def describe(self) -> str:
        """One sentence for an incident's note and a log line."""
        expected = self.tail * self.scored_rows
        head = (f"{self.feature}: {self.atypical_rows} of {self.scored_rows} scored rows lie farther from the "
                f"reference than {1 - self.tail:.0%} of its own rows ({expected:.0f} expected by chance)")
        if not self.clusters:
            return head
        groups = ", ".join(f"{c.size} rows at distance {c.centroid_distance:.3g} (e.g. "
                           f"{', '.join(map(str, c.examples))})" for c in self.clusters)
        return f"{head}; the {len(self.rows)} farthest form {len(self.clusters)} cluster(s): {groups}"


def knn_distance(rows: np.ndarray, reference: np.ndarray, k: int, *, exclude_self: bool = False) -> np.ndarray:
    """Each row's Euclidean distance to its ``k``-th nearest reference row, in blocks of
    :data:`BLOCK_ROWS` rows. ``exclude_self``: ``rows`` *is* ``reference``, and a row is not its
    own neighbour (the nearest, at distance 0, is skipped)."""
    ref = reference.astype(np.float64, copy=False)
    ref_sq = np.einsum("ij,ij->i", ref, ref)
    kth = k if exclude_self else k - 1   # 0-based position of the k-th neighbour
    out = np.empty(len(rows))
    for start in range(0, len(rows), BLOCK_ROWS):
        block = rows[start:start + BLOCK_ROWS].astype(np.float64, copy=False)
        d2 = np.einsum("ij,ij->i", block, block)[:, None] + ref_sq[None, :] - 2.0 * (block @ ref.T)
        if exclude_self:
            d2[np.arange(len(block)), np.arange(start, start + len(block))] = -np.inf
        out[start:start + len(block)] = np.partition(d2, kth, axis=1)[:, kth]
    return np.sqrt(np.maximum(out, 0.0))


def drifted_rows(prepared: Mapping[str, EmbeddingReference | str], verdicts: Mapping[str, EmbeddingDrift | str],
                 current: pd.DataFrame, model_cfg: ModelConfig, seed: int = 0) -> list[DriftedRows]:
    """The rows behind each embedding feature whose test drifted (module docstring); none for
    stable, skipped or untestable features."""
    rng = np.random.default_rng([seed, 10])
    out = []
    for name in model_cfg.embedding_features:
        ref, verdict = prepared.get(name), verdicts.get(name)
        if not (isinstance(ref, EmbeddingReference) and isinstance(verdict, EmbeddingDrift) and verdict.drifted):
            continue
        found = rows_behind(name, ref, current, model_cfg, rng, seed)
        if found is not None:
            out.append(found)
    return out


def rows_behind(name: str, ref: EmbeddingReference, current: pd.DataFrame, model_cfg: ModelConfig,
                rng: np.random.Generator, seed: int = 0) -> DriftedRows | None:
    """One feature's atypical rows and their clusters; None when too few rows hold a vector."""
    positions, block = sampled_block(current[name], ref.dim, SCORED_ROWS, rng, side="current window", name=name)
    finite_rows = np.isfinite(block).all(axis=1)
    positions, block = positions[finite_rows], block[finite_rows]
    k = min(NEIGHBOURS, len(ref.projected) - 1)
    if k < 1 or not len(block):
        return None
    with threadpool_limits(1):  # small matrices; see monitor.drift.embedding.check_block
        reference = ref.projected * ref.scale          # un-whitened: module docstring
        projected = ref.project(block)[0] * ref.scale
        threshold = float(np.quantile(knn_distance(reference, reference, k, exclude_self=True), 1 - TAIL))
        distance = knn_distance(projected, reference, k)
        beyond = np.flatnonzero(distance > threshold)
        top = beyond[np.argsort(-distance[beyond], kind="stable")][:MAX_ROWS]
        labels = cluster_labels(projected[top], seed)
    frame_rows = current.iloc[positions[top]]
    ids = [_text(v) for v in _column(frame_rows, "id")]
    clusters = tuple(_cluster(c, labels, projected[top], distance[top], ids, reference, k)
                     for c in range(int(labels.max()) + 1 if len(labels) else 0))
    rows = tuple(AtypicalRow(id=ids[i], ts=_epoch(ts), distance=float(distance[top[i]]), cluster=int(labels[i]),
                             score=_number(score), prediction=_plain(pred), input_uri=_text(uri))
                 for i, (ts, score, pred, uri) in enumerate(zip(
                     _column(frame_rows, "ts"), _column(frame_rows, model_cfg.score),
                     _column(frame_rows, model_cfg.prediction), _column(frame_rows, INPUT_URI))))
    return DriftedRows(name, scored_rows=len(block), reference_rows=len(reference), neighbours=k,
                       threshold=threshold, atypical_rows=len(beyond), rows=rows, clusters=clusters)


def cluster_labels(points: np.ndarray, seed: int = 0) -> np.ndarray:
    """k-means labels of ``points`` (module docstring: ``k`` by the silhouette, 1 below
    :data:`MIN_SILHOUETTE`), renumbered by cluster size, largest first."""
    n = len(points)
    labels = np.zeros(n, dtype=int)
    if n >= MIN_SPLIT_ROWS:
        from sklearn.cluster import KMeans
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.metrics import silhouette_score
        best = MIN_SILHOUETTE
        for k in range(2, min(MAX_CLUSTERS, n - 1) + 1):
            with warnings.catch_warnings():  # repeated rows: fewer distinct clusters than k, said below
                warnings.simplefilter("ignore", ConvergenceWarning)
                found = KMeans(n_clusters=k, n_init=4, random_state=seed).fit_predict(points)
            if len(np.unique(found)) < 2:
                continue
            quality = float(silhouette_score(points, found))
            if quality > best:
                best, labels = quality, found
    sizes = np.bincount(labels)
    order = np.argsort(-sizes, kind="stable")          # old label, largest cluster first
    renumber = np.empty_like(order)
    renumber[order] = np.arange(len(order))
    return renumber[labels]


def _cluster(c: int, labels: np.ndarray, points: np.ndarray, distance: np.ndarray, ids: list[str | None],
             reference: np.ndarray, k: int) -> RowCluster:
    members = np.flatnonzero(labels == c)
    centroid = points[members].mean(axis=0)
    nearest = members[np.argsort(((points[members] - centroid) ** 2).sum(axis=1), kind="stable")][:MAX_EXAMPLES]
    return RowCluster(c, len(members), float(knn_distance(centroid[None, :], reference, k)[0]),
                      float(distance[members].mean()), tuple(ids[i] for i in nearest))


def _column(frame: pd.DataFrame, name: str) -> list[Any]:
    return frame[name].tolist() if name in frame.columns else [None] * len(frame)


def _missing(value: Any) -> bool:
    try:
        return value is None or bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _text(value: Any) -> str | None:
    return None if _missing(value) else str(value)


def _number(value: Any) -> float | None:
    return finite(value)


def _epoch(value: Any) -> float | None:
    if _missing(value):
        return None
    if isinstance(value, pd.Timestamp):
        return value.timestamp()
    return float(value)


def _plain(value: Any) -> Any:
    """A JSON-safe prediction: an int, a float or text."""
    if _missing(value):
        return None
    if isinstance(value, np.generic):
        value = value.item()
    return value if isinstance(value, (int, float, str)) else str(value)
