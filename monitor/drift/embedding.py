"""Embedding drift: one verdict per embedding feature, at a cost bounded by two settings.

An embedding column (one float32 vector per row, :mod:`monitor.embeddings`) cannot go through
Evidently's per-column tests. Each embedding feature instead gets one two-sample test of its
vectors (:mod:`monitor.drift.embedding_methods`, ``drift.embedding_method``), and counts as *one*
feature in the drift share, like a numeric column.

Cost is bounded whatever the window and the dimension:

1. **Row cap.** Each side gets a seeded uniform sample of at most ``drift.embedding_sample_rows``
   vectors, drawn *before* the object column is turned into a matrix.
2. **Projection.** Vectors are projected on ``drift.embedding_components`` principal components,
   fitted once per champion on the reference (:class:`EmbeddingReference`, cached with the prepared
   reference).

The components are fitted on one part of the reference and the reference side of the test is the
*other* part. Fitted and tested on the same rows, the reference's leading components carry more
variance than any new rows (in 768 dimensions at 2,000 rows, about twice as much on noise): a
test sensitive to spread (MMD, K-S, the reconstruction error) would flag every window.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]  # scikit-learn's own dependency

from monitor.config import DriftConfig, ModelConfig
from monitor.drift import embedding_methods as em
from monitor.embeddings import matrix, present
from monitor.errors import DataError
from monitor.finite import finite

MIN_ROWS = 20   # vectors a side needs before a test means anything


@dataclass(frozen=True)
class EmbeddingReference:
    """One embedding feature's reference, prepared once per champion."""

    dim: int
    rows: int                   # reference rows holding a vector
    fit_rows: int               # rows the projection was fitted on
    mean: np.ndarray            # (dim,)
    components: np.ndarray      # (k, dim), orthonormal rows
    explained: np.ndarray       # (k,) share of the variance each explains
    scale: np.ndarray           # (k,) each component's sd on the fit rows: projections are whitened by it
    projected: np.ndarray       # (m, k): the held-out reference rows the tests compare with, whitened
    errors: np.ndarray          # (m,): their reconstruction errors (method reconstruction)
    keep: int                   # components the reconstruction keeps (65 % of the variance)

    def project(self, block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows projected on the components and whitened (each component in units of its sd on the
        fit rows), and their reconstruction errors.

        Whitening gives every kept component the same say in the MMD's kernel: on the digits bench,
        pixel noise moved low-variance components that the leading ones drowned (flagged on 2 of 12
        windows unwhitened, 12 of 12 whitened, rotations caught either way). The scale comes from
        the fit rows, not the tested ones, so the permutation test stays exact."""
        centred = block.astype(np.float64) - self.mean
        projected = centred @ self.components.T
        return projected / self.scale, em.reconstruction_errors(centred, projected, self.keep)


@dataclass(frozen=True)
class EmbeddingDrift:
    """One embedding feature's verdict (:mod:`monitor.drift.embedding_methods` for the meaning of
    ``score`` per method); ``seconds`` is the test's own time, without the reference's preparation."""

    name: str
    method: str
    score: float
    statistic: float
    threshold: float
    drifted: bool
    reference_rows: int
    current_rows: int
    components: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"statistic": finite(self.statistic), "reference_rows": self.reference_rows,
                "current_rows": self.current_rows, "components": self.components, "seconds": self.seconds}


def _valid(block: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.isfinite(block).all(axis=1))


def prepare_block(block: np.ndarray, *, sample_rows: int, components: int, seed: int) -> EmbeddingReference | str:
    """Fit the projection on one part of the reference's vectors and project the other part (module
    docstring); at most ``sample_rows`` rows each. A string says why it cannot be (too few vectors)."""
    with threadpool_limits(1):   # see check_block
        return _prepare(block, sample_rows, components, seed)


def _prepare(block: np.ndarray, sample_rows: int, components: int, seed: int) -> EmbeddingReference | str:
    from sklearn.decomposition import PCA
    rng = np.random.default_rng([seed, 7])
    rows = _valid(block)
    if len(rows) < 2 * MIN_ROWS:
        return f"{len(rows)} vectors in the reference, {2 * MIN_ROWS} needed"
    rows = rng.permutation(rows)
    half = min(len(rows) // 2, sample_rows)
    fit, test = np.sort(rows[:half]), np.sort(rows[half:half + sample_rows])
    dim = block.shape[1]
    k = min(components, dim, len(fit) - 1)
    pca = PCA(n_components=k, svd_solver="randomized" if k < min(len(fit), dim) // 2 else "full",
              random_state=seed).fit(block[fit].astype(np.float64))
    keep = em.reconstruction_components(pca.explained_variance_ratio_)
    scale = np.sqrt(pca.explained_variance_)
    scale[~(scale > 0)] = 1.0
    partial = EmbeddingReference(dim, len(rows), len(fit), pca.mean_, pca.components_,
                                 pca.explained_variance_ratio_, scale, np.empty((0, k)), np.empty(0), keep)
    projected, errors = partial.project(block[test])
    return EmbeddingReference(dim, len(rows), len(fit), pca.mean_, pca.components_, pca.explained_variance_ratio_,
                              scale, projected, errors, keep)


def check_block(name: str, ref: EmbeddingReference, block: np.ndarray, *, method: str, threshold: float | None,
               sample_rows: int, seed: int) -> EmbeddingDrift | str:
    """The window's vectors (``block``, at most ``sample_rows`` used) against the prepared reference.

    Runs with one BLAS thread: the matrices are small (a few thousand rows), and on a busy machine
    OpenBLAS's threads spin against each other and everything else (a 2,000 x 768 PCA took 5.5 s
    with two threads at a load of 7 on 2 cores, 0.36 s with one)."""
    with threadpool_limits(1):
        return _test(name, ref, block, method, threshold, sample_rows, seed)


def _test(name: str, ref: EmbeddingReference, block: np.ndarray, method: str, threshold: float | None,
          sample_rows: int, seed: int) -> EmbeddingDrift | str:
    started = time.perf_counter()
    rng = np.random.default_rng([seed, 8])
    rows = _valid(block)
    if len(rows) < MIN_ROWS:
        return f"{len(rows)} vectors in the current window, {MIN_ROWS} needed"
    if len(rows) > sample_rows:
        rows = np.sort(rng.choice(rows, size=sample_rows, replace=False))
    projected, errors = ref.project(block[rows])
    limit = em.DEFAULT_THRESHOLDS[method] if threshold is None else threshold
    if method == em.MMD:
        stat = em.mmd(ref.projected, projected, rng)
    elif method == em.CLASSIFIER:
        stat = em.classifier(ref.projected, projected, rng)
    elif method == em.COMPONENTS:
        stat = em.components(ref.projected, projected, limit)
    elif method == em.RECONSTRUCTION:
        stat = em.reconstruction(ref.errors, errors)
    else:
        raise ValueError(f"unknown embedding drift method {method!r} (one of {', '.join(em.METHODS)})")
    return EmbeddingDrift(name, method, stat.score, stat.statistic, limit, em.drifted(method, stat.score, limit),
                          len(ref.projected), len(rows), ref.components.shape[0], time.perf_counter() - started)


def sampled_matrix(values: pd.Series, dim: int, cap: int, rng: np.random.Generator, *, side: str,
                   name: str) -> np.ndarray:
    """The ``(rows, dim)`` block of at most ``cap`` of a frame column's vectors, drawn uniformly
    among the rows that hold one, before any vector is copied (a million-row window costs one
    scan for presence and ``cap`` copies)."""
    return sampled_block(values, dim, cap, rng, side=side, name=name)[1]


def sampled_block(values: pd.Series, dim: int, cap: int, rng: np.random.Generator, *, side: str,
                  name: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sampled_matrix` with the frame positions its rows come from (``(rows,)``, ascending):
    what names the rows behind a drift (:mod:`monitor.drift.drifted_rows`)."""
    objects = values.to_numpy(dtype=object)
    holding = np.flatnonzero(present(objects))
    if len(holding) > cap:
        holding = np.sort(rng.choice(holding, size=cap, replace=False))
    if not len(holding):
        return holding, np.empty((0, dim), dtype=np.float32)
    try:
        return holding, matrix(objects[holding], dim)
    except (ValueError, TypeError) as exc:
        bad = next((int(p) for p in holding if np.shape(objects[p]) != (dim,)), int(holding[0]))
        raise DataError(f"{side} column {name!r} must hold vectors of {dim} numbers; row {bad} holds "
                        f"{_describe(objects[bad])}") from exc


def _describe(value: Any) -> str:
    shape = np.shape(value)
    return f"{len(value)} values" if len(shape) == 1 and not isinstance(value, str) else repr(value)[:60]


def prepare_embeddings(reference: pd.DataFrame, model_cfg: ModelConfig, drift_cfg: DriftConfig,
                       seed: int = 0) -> dict[str, EmbeddingReference | str]:
    """Each embedding feature's prepared reference (or why it cannot be tested), once per champion:
    at most ``2 x drift.embedding_sample_rows`` of its vectors, half to fit the projection on."""
    rng = np.random.default_rng([seed, 6])
    out: dict[str, EmbeddingReference | str] = {}
    for name in model_cfg.embedding_features:
        if name not in reference.columns:
            out[name] = "no values in the reference"
            continue
        block = sampled_matrix(reference[name], model_cfg.embedding_dim(name), 2 * drift_cfg.embedding_sample_rows,
                               rng, side="reference", name=name)
        out[name] = prepare_block(block, sample_rows=drift_cfg.embedding_sample_rows,
                                  components=drift_cfg.embedding_components, seed=seed)
    return out


def embedding_drifts(prepared: Mapping[str, EmbeddingReference | str], current: pd.DataFrame,
                     model_cfg: ModelConfig, drift_cfg: DriftConfig, seed: int = 0) -> dict[str, EmbeddingDrift | str]:
    """Each embedding feature's verdict on the window (or why it was not tested)."""
    rng = np.random.default_rng([seed, 9])
    out: dict[str, EmbeddingDrift | str] = {}
    for name in model_cfg.embedding_features:
        ref = prepared.get(name, "no values in the reference")
        if isinstance(ref, str):
            out[name] = ref
            continue
        block = sampled_matrix(current[name], ref.dim, drift_cfg.embedding_sample_rows, rng, side="current window",
                               name=name)
        out[name] = check_block(name, ref, block, method=drift_cfg.embedding_method,
                               threshold=drift_cfg.embedding_threshold, sample_rows=drift_cfg.embedding_sample_rows,
                               seed=seed)
    return out
