"""A deterministic sentence encoder for the text example: each word gets a fixed random vector
(drawn from a hash of the word, so every process and every run agrees without a vocabulary file),
a sentence is the mean of its words' vectors, scaled to unit length.

    encode(["my invoice is wrong"])      # float32 [1, 64]

This is random indexing, a stand-in for a real sentence encoder (a transformer's pooled output):
what matters to driftloop is the same, a fixed-length vector per message sent as an ``embedding``
feature (``text_emb``). New words (the corpus's vocabulary shift) land in directions the reference
never had, which is what embedding drift sees; the topics stay learnable from them, which is what
a retrain needs.
"""
from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Iterable

import numpy as np

DIM = 64


@lru_cache(maxsize=65536)
def word_vector(word: str, dim: int = DIM) -> np.ndarray:
    """The word's vector: standard normal draws seeded by the word's BLAKE2 digest."""
    seed = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
    return np.random.default_rng(seed).standard_normal(dim).astype(np.float32)


def encode(texts: Iterable[str], dim: int = DIM) -> np.ndarray:
    """float32 ``[N, dim]``: each text's mean word vector at unit length (zeros for an empty text)."""
    rows = []
    for text in texts:
        words = str(text).lower().split()
        v = np.mean([word_vector(w, dim) for w in words], axis=0) if words else np.zeros(dim, np.float32)
        norm = float(np.linalg.norm(v))
        rows.append(v / norm if norm > 0 else v)
    return np.stack(rows).astype(np.float32) if rows else np.zeros((0, dim), np.float32)


def embedding_column(texts: Iterable[str], dim: int = DIM) -> list[np.ndarray]:
    """The frame form of an embedding feature: one float32 array per row."""
    return list(encode(texts, dim))
