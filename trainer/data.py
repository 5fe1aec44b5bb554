"""Checking training data before any training starts, and splitting it.

Every problem becomes a :class:`DataError` that names the column or rows and what was expected,
raised before a single step is taken (and before an MLflow run is opened).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from monitor.config import ModelConfig
from monitor.errors import DataError, UserInputError
from trainer.model import category_text

# Columns a store window carries besides features and target; ignored, not an error.
WINDOW_COLUMNS = frozenset({"id", "ts", "label_ts", "model_version"})


def read_table(path: str | Path) -> pd.DataFrame:
    """A CSV or Parquet file (by extension; ``.csv.gz`` works) as a DataFrame."""
    path = Path(path)
    if not path.exists():
        raise UserInputError(f"data file not found: {path}")
    name = path.name.lower()
    try:
        if name.endswith((".parquet", ".pq")):
            return pd.read_parquet(path)
        if name.endswith((".csv", ".csv.gz", ".txt")):
            return pd.read_csv(path)
    except Exception as exc:  # pandas/pyarrow raise many types for a malformed file
        raise DataError(f"{path}: cannot read: {exc}") from exc
    raise UserInputError(f"{path}: unsupported file type (expected .csv, .csv.gz or .parquet)")


def check_frame(df: pd.DataFrame, model_cfg: ModelConfig, *, what: str = "training data",
                min_rows: int = 1) -> pd.DataFrame:
    """Validate ``df`` and return a clean copy: features in configured order (numeric float64 with
    NaN where missing, categorical str with None where missing) and the target as int64 0/1.
    Store-window columns (id, ts, score, prediction, label_ts), the id column and ``model.ignore``
    are dropped; any other extra column is an error, because it usually means the configured
    schema is not the data's."""
    if not isinstance(df, pd.DataFrame):
        raise DataError(f"{what}: expected a pandas DataFrame, got {type(df).__name__}")
    if len(df) == 0:
        raise DataError(f"{what} is empty (no rows); nothing to train on")
    features, target = model_cfg.feature_names, model_cfg.target
    missing = [c for c in [*features, target] if c not in df.columns]
    if missing:
        raise DataError(f"{what}: missing column(s) {', '.join(missing)} (expected features "
                        f"{', '.join(features)} and target {target!r})")
    ignorable = WINDOW_COLUMNS | {model_cfg.score, model_cfg.prediction, model_cfg.id, *model_cfg.ignore}
    extra = [str(c) for c in df.columns if c not in features and c != target and c not in ignorable]
    if extra:
        raise DataError(f"{what}: column(s) {', '.join(extra)} not in the model's features; add them to "
                        f"model.features, list them in model.ignore, or drop them")
    out = pd.DataFrame(index=pd.RangeIndex(len(df)))
    empty = [name for name in features if df[name].isna().all()]
    if empty:
        raise DataError(f"{what}: feature column(s) {', '.join(empty)} have no values (all missing); "
                        "nothing to learn from: drop them from model.features")
    # Missing values are kept (the model imputes and flags them); values of the wrong type are not.
    for name in model_cfg.numeric_features:
        raw = df[name].reset_index(drop=True)
        if isinstance(raw.dtype, pd.CategoricalDtype):
            raw = raw.astype(object)
        col = pd.to_numeric(raw, errors="coerce").astype("float64")
        bad = (col.isna() & raw.notna()).to_numpy() | np.isinf(col.to_numpy())
        if bad.any():
            rows = np.nonzero(bad)[0]
            raise DataError(f"{what}: numeric feature {name!r} has {len(rows)} non-numeric or infinite "
                            f"value(s) (first at row {rows[0]}: {raw.iloc[rows[0]]!r}); did its type change? "
                            "make it categorical in model.features, or fix the data")
        out[name] = col
    for name in model_cfg.categorical_features:
        out[name] = pd.Series(category_text(df[name]), dtype=object)
    y = pd.to_numeric(df[target].reset_index(drop=True), errors="coerce")
    bad = ~y.isin([0, 1]).to_numpy()
    if bad.any():
        rows = np.nonzero(bad)[0]
        first = df[target].iloc[rows[0]]
        first = first.item() if isinstance(first, np.generic) else first
        raise DataError(f"{what}: target {target!r} has {len(rows)} value(s) that are not 0 or 1 "
                        f"(first at row {rows[0]}: {first!r})")
    out[target] = y.astype("int64")
    classes = out[target].nunique()
    if classes < 2:
        raise DataError(f"{what}: target {target!r} has a single class ({int(out[target].iloc[0])}); "
                        "need both 0 and 1 to train")
    if len(out) < min_rows:
        raise DataError(f"{what}: {len(out)} rows, need at least {min_rows} (training.min_rows)")
    return out


def split(df: pd.DataFrame, fraction: float, target: str, seed: int, *, what: str = "data",
          part: str = "validation") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Stratified random split: ``(rest, held_out)`` with about ``fraction`` of each class held out.
    Both sides must contain both classes, or the held-out metrics mean nothing."""
    rng = np.random.default_rng(seed)
    held = []
    for cls in (0, 1):
        idx = np.nonzero(df[target].to_numpy() == cls)[0]
        k = int(round(len(idx) * fraction))
        if k < 1 or k >= len(idx):
            raise DataError(f"{what}: too few rows to hold out a {part} set: class {cls} has {len(idx)} row(s), "
                            f"a {fraction:.0%} split needs both sides non-empty; give more labelled rows")
        held.append(rng.choice(idx, size=k, replace=False))
    mask = np.zeros(len(df), dtype=bool)
    mask[np.concatenate(held)] = True
    return df[~mask].reset_index(drop=True), df[mask].reset_index(drop=True)


def tensors(model, df: pd.DataFrame, target: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x_num, x_cat = model.encode(df)
    return x_num, x_cat, torch.as_tensor(df[target].to_numpy(), dtype=torch.float32)


def fingerprint(*frames: pd.DataFrame) -> str:
    """A short content hash of the training rows, so a checkpoint is never resumed on other data."""
    h = hashlib.sha256()
    for df in frames:
        h.update(pd.util.hash_pandas_object(df, index=False).to_numpy().tobytes())
        h.update(",".join(map(str, df.columns)).encode())
    return h.hexdigest()[:16]
