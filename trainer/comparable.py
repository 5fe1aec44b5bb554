"""Covariate shift or concept change? The recent rows that are comparable to the champion's reference.

A champion can do worse on recent rows for two reasons. Its *concept* changed: the same inputs now
carry other labels (P(y|x) moved), and the old rows teach the wrong answer. Or the *inputs* moved
(covariate shift) into a region the champion never learned, while the labels there follow the same
rule: rotated digits are still the same digits. Only the first justifies lifting the limit on what
the retrain may lose on the reference data; under the second, lifting it lets the new model forget
the old inputs (a user's digit model retrained on rotated digits fell from 0.97 to 0.41 on upright
ones).

So the champion is also judged on the recent rows that lie where the reference lies: each recent row's
distance to its nearest reference row, in a space where every feature counts about once (numeric
columns scaled by the reference's spread; categoricals one-hot on the reference's commonest values;
an embedding projected on its leading principal components and whitened), against the distances
between reference rows themselves (their 95th percentile). On those comparable rows the champion is
compared with its own score on the reference rows nearest to them (a matched sample). When it still
holds there, the drop comes from the new inputs: covariate shift. When it fails there too, the
concept changed. When too few recent rows are comparable, nothing says the concept changed where
the champion was trained: covariate shift (the safe side: keep the old inputs learned).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from monitor.config import DriftloopConfig

REFERENCE_ROWS = 2000      # reference rows the distances are measured against (a seeded sample)
RECENT_ROWS = 5000         # recent rows measured (a seeded sample)
MIN_COMPARABLE = 100       # comparable rows needed to judge the concept on them
TOP_CATEGORIES = 10
EMBEDDING_COMPONENTS = 16
QUANTILE = 0.95


@dataclass(frozen=True)
class Comparable:
    recent: pd.DataFrame       # the recent rows near the reference
    matched: pd.DataFrame      # for each, its nearest reference row
    share: float               # of the recent rows measured


def _blocks(cfg: DriftloopConfig, reference: pd.DataFrame, frames: list[pd.DataFrame]) -> list[np.ndarray]:
    """``frames`` as matrices in one space fitted on ``reference`` (see the module doc)."""
    from monitor.embeddings import matrix

    out: list[list[np.ndarray]] = [[] for _ in frames]
    for spec in cfg.model.features:
        name = spec.name
        if name not in reference.columns or any(name not in f.columns for f in frames):
            continue
        if spec.type == "numeric":
            ref = pd.to_numeric(reference[name], errors="coerce").to_numpy(dtype=np.float64)
            center = np.nanmedian(ref) if np.isfinite(ref).any() else 0.0
            scale = np.nanstd(ref) if np.isfinite(ref).any() else 0.0
            scale = scale if scale > 0 else 1.0
            for i, f in enumerate(frames):
                x = pd.to_numeric(f[name], errors="coerce").to_numpy(dtype=np.float64)
                x = np.where(np.isfinite(x), x, center)
                out[i].append(((x - center) / scale)[:, None])
        elif spec.type == "categorical":
            top = reference[name].astype(str).value_counts().index[:TOP_CATEGORIES]
            for i, f in enumerate(frames):
                values = f[name].astype(str).to_numpy()
                out[i].append(np.stack([values == c for c in top], axis=1).astype(np.float64)
                              if len(top) else np.zeros((len(f), 0)))
        elif spec.type == "embedding" and spec.dim:
            ref = matrix(reference[name], spec.dim).astype(np.float64)
            ok = ~np.isnan(ref).any(axis=1)
            if ok.sum() < 10:
                continue
            mean = ref[ok].mean(axis=0)
            _, sv, vt = np.linalg.svd(ref[ok] - mean, full_matrices=False)
            k = min(EMBEDDING_COMPONENTS, len(sv))
            comps, sd = vt[:k], np.maximum(sv[:k] / np.sqrt(max(1, ok.sum() - 1)), 1e-12)
            for i, f in enumerate(frames):
                block = matrix(f[name], spec.dim).astype(np.float64)
                block = np.where(np.isnan(block), mean, block)
                # Whitened, then shrunk so the whole embedding counts about as one feature.
                out[i].append(((block - mean) @ comps.T) / sd / np.sqrt(k))
    return [np.hstack(parts) if parts else np.zeros((len(f), 0)) for parts, f in zip(out, frames)]


def comparable_rows(cfg: DriftloopConfig, recent: pd.DataFrame, reference: pd.DataFrame,
                    seed: int = 0) -> Comparable | None:
    """The recent rows near the reference, with their nearest reference rows; None when the features
    give no space to measure in (no usable feature, too few rows)."""
    from sklearn.neighbors import NearestNeighbors

    rng = np.random.default_rng(seed)
    if len(reference) < 20 or len(recent) == 0:
        return None
    ref = reference.iloc[np.sort(rng.choice(len(reference), min(REFERENCE_ROWS, len(reference)), replace=False))]
    new = recent.iloc[np.sort(rng.choice(len(recent), min(RECENT_ROWS, len(recent)), replace=False))]
    ref_x, new_x = _blocks(cfg, ref, [ref, new])
    if ref_x.shape[1] == 0:
        return None
    index = NearestNeighbors(n_neighbors=2).fit(ref_x)
    own, _ = index.kneighbors(ref_x, n_neighbors=2)   # the nearest *other* reference row
    bar = float(np.quantile(own[:, 1], QUANTILE))
    dist, nearest = index.kneighbors(new_x, n_neighbors=1)
    near = dist[:, 0] <= bar
    return Comparable(new[near].reset_index(drop=True), ref.iloc[nearest[near, 0]].reset_index(drop=True),
                      float(near.mean()))
