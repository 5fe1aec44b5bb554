"""Checking training data before any training starts, and splitting it.

Every problem becomes a :class:`DataError` that names the column or rows and what was expected,
raised before a single step is taken (and before an MLflow run is opened).

The target per ``model.task`` (:func:`target_values`): binary 0/1 (or, with ``model.classes``
[negative, positive], those names); multiclass the class names of ``model.classes`` (or numbers
equal to them) turned into class indices; regression a finite number. Store windows and reference
samples already hold the internal form (monitor/tasks.py: 0/1, class indices): a multiclass frame
with the ``__proba_<i>`` columns of every class is one of those, and its target is read as indices.
"""
from __future__ import annotations

import gzip
import hashlib
import logging
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd
import torch

from monitor.config import ModelConfig
from monitor.embeddings import INPUT_URI, matrix
from monitor.codes import written_as_codes
from monitor.errors import DataError, UserInputError
from monitor.tasks import INTERNAL_PROBA_PREFIX, task_of
from trainer.model import category_text

log = logging.getLogger(__name__)

# Columns a store window carries besides features and target; ignored, not an error.
WINDOW_COLUMNS = frozenset({"id", "ts", "label_ts", "model_version"})


# Where check_frame leaves the class names of a multiclass frame, for split's warning (kept through row selections).
CLASSES_ATTR = "driftloop_classes"


def read_table(path: str | Path, *, text: Iterable[str] = ()) -> pd.DataFrame:
    """A CSV or Parquet file (by extension; ``.csv.gz`` works) as a DataFrame: what ``driftloop init``
    infers the schema from and ``driftloop train`` trains on, so both read a file alike.

    In a CSV, a column whose values are written with leading zeros (``01001``: a zip or account code,
    not ``0`` or ``0.5``) is kept as the file's text, never parsed into the integer ``1001``, and so are
    the columns named in ``text`` (the configured categorical features): a category is what the file
    says, the same text a service later sends."""
    path = Path(path)
    if not path.exists():
        raise UserInputError(f"data file not found: {path}")
    name = path.name.lower()
    try:
        if name.endswith((".parquet", ".pq")):
            return pd.read_parquet(path)
        if name.endswith((".csv", ".csv.gz", ".txt")):
            return _read_csv(path, set(text))
    except Exception as exc:  # pandas/pyarrow raise many types for a malformed file
        raise DataError(f"{path}: cannot read: {exc}") from exc
    raise UserInputError(f"{path}: unsupported file type (expected .csv, .csv.gz or .parquet)")


def _read_csv(path: Path, text: set[str]) -> pd.DataFrame:
    """The CSV with pandas' types, but codes written with leading zeros and the ``text`` columns as text."""
    header = [str(c) for c in pd.read_csv(path, nrows=0).columns]
    as_text = {c: str for c in header if c in text}
    df = pd.read_csv(path, dtype=as_text or None)
    # Columns pandas parsed as whole numbers (a code's digits, gaps aside): read again as text, only
    # those, to see how they were written.
    parsed = [i for i, c in enumerate(df.columns) if str(c) not in as_text and _whole_numbers(df.iloc[:, i])]
    if parsed and _may_hold_codes(path):
        raw = pd.read_csv(path, usecols=parsed, dtype=str)
        for k, i in enumerate(parsed):
            written = raw.iloc[:, k]
            if written_as_codes(written):
                df.isetitem(i, written)
    return df


_SCAN_CHUNK = 1 << 24
_DIGITS = np.zeros(256, dtype=bool)
_DIGITS[ord("0"):ord("9") + 1] = True
_FIELD_START = np.zeros(256, dtype=bool)        # what a field's first character follows
_FIELD_START[[ord(","), ord("\n"), ord('"')]] = True
_LEAD = np.zeros(256, dtype=bool)               # what may stand between a field's start and its digits
_LEAD[[ord(" "), ord("\t"), ord("+"), ord("-")]] = True


def _may_hold_codes(path: Path) -> bool:
    """Could any field of the CSV at ``path`` begin with a leading zero (``,01001``, ``,"007"``,
    ``, -05``)? One vectorised pass over its bytes, several times cheaper than parsing it again; True
    may also be a text field such as ``007 Bond``, which the second read then tells apart. Where a CSV
    holds none (most numeric data), no column of it is written as codes and the second read is skipped."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as f:
        before = b"\n\n"  # the file's start is a field's start
        while chunk := f.read(_SCAN_CHUNK):
            b = np.frombuffer(before + chunk, dtype=np.uint8)
            at = np.flatnonzero(b[2:-1] == ord("0")) + 2   # each 0 with a byte after it and two before
            at = at[_DIGITS[b[at + 1]]]                   # followed by a digit
            prev, prev2 = b[at - 1], b[at - 2]
            if (_FIELD_START[prev] | (_LEAD[prev] & (_FIELD_START[prev2] | (prev2 == ord(" "))))).any():
                return True
            before = b[-3:].tobytes()  # a field's start split across two chunks
    return False


def _whole_numbers(column: pd.Series) -> bool:
    """Integers, or floats that are whole numbers where present (integers with a gap): what a code
    written with leading zeros becomes when parsed."""
    if pd.api.types.is_bool_dtype(column.dtype) or not pd.api.types.is_numeric_dtype(column.dtype):
        return False
    if pd.api.types.is_integer_dtype(column.dtype):
        return True
    values = column.to_numpy(dtype="float64", na_value=np.nan)
    values = values[~np.isnan(values)]
    return bool(np.isfinite(values).all() and (values == np.round(values)).all())


def check_frame(df: pd.DataFrame, model_cfg: ModelConfig, *, what: str = "training data",
                min_rows: int = 1) -> pd.DataFrame:
    """Validate ``df`` and return a clean copy: features in configured order (numeric float64 with
    NaN where missing, categorical str with None where missing) and the target as
    :func:`target_values` gives it (int64 0/1 or class indices; float64 for regression).
    Store-window columns (id, ts, score, prediction, label_ts, ``__proba_<i>``), the id column and
    ``model.ignore`` are dropped; any other extra column is an error, because it usually means the configured
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
    ignorable = WINDOW_COLUMNS | {INPUT_URI, model_cfg.score, model_cfg.prediction, model_cfg.id, *model_cfg.ignore}
    extra = [str(c) for c in df.columns if c not in features and c != target and c not in ignorable
             and not str(c).startswith(INTERNAL_PROBA_PREFIX)]
    if extra:
        raise DataError(f"{what}: column(s) {', '.join(extra)} not in the model's features; add them to "
                        f"model.features, list them in model.ignore, or drop them")
    # Built as a dict of columns, one DataFrame at the end: one column at a time fragments the frame
    # (pandas warned 56 times on a 155-column table).
    columns: dict[str, Any] = {}
    empty = empty_features(df, features)
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
        columns[name] = col
    for name in model_cfg.categorical_features:
        columns[name] = pd.Series(category_text(df[name]), dtype=object)
    for name in model_cfg.embedding_features:
        columns[name] = _embedding_column(df[name].reset_index(drop=True), name, model_cfg.embedding_dim(name), what)
    if INPUT_URI in df.columns:  # the raw input's reference: the user's training code resolves it
        columns[INPUT_URI] = pd.Series([None if _missing_text(v) else str(v) for v in df[INPUT_URI]], dtype=object)
    columns[target] = target_values(df[target].reset_index(drop=True), model_cfg, what,
                                indices=_holds_indices(df, model_cfg))
    out = pd.DataFrame({name: pd.Series(col).reset_index(drop=True) for name, col in columns.items()},
                       index=pd.RangeIndex(len(df)))
    if len(out) < min_rows:
        raise DataError(f"{what}: {len(out)} rows, need at least {min_rows} (training.min_rows)")
    if model_cfg.classes:  # split's warning names a class, not its index
        out.attrs[CLASSES_ATTR] = list(model_cfg.classes)
    return out


def empty_features(df: pd.DataFrame, features: list[str]) -> list[str]:
    """The features of ``features`` that ``df`` has as columns with no value in any row: what
    :func:`check_frame` refuses to train on, and what the daemon waits out instead of starting a
    retrain that would fail (monitor/daemon/runtime/retrains.py)."""
    return [name for name in features if name in df.columns and df[name].isna().all()]


def _missing_text(value: object) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))


def _embedding_column(raw: pd.Series, name: str, dim: int, what: str) -> pd.Series:
    """One float32 array of length ``dim`` per row (None where missing); DataError naming the first
    row whose value is not ``dim`` finite numbers."""
    values = np.empty(len(raw), dtype=object)
    for i, v in enumerate(raw.tolist()):
        if v is None or (isinstance(v, float) and np.isnan(v)):
            values[i] = None
            continue
        try:
            block = matrix([v], dim)
        except (ValueError, TypeError):
            shown = f"{len(v)} value(s)" if hasattr(v, "__len__") else repr(v)
            raise DataError(f"{what}: embedding feature {name!r} at row {i}: expected a list of {dim} numbers, "
                            f"got {shown}") from None
        if not np.isfinite(block).all():
            raise DataError(f"{what}: embedding feature {name!r} at row {i}: NaN or infinite values")
        values[i] = block[0]
    if not any(v is not None for v in values):
        raise DataError(f"{what}: embedding feature {name!r} has no values (all missing)")
    return pd.Series(values, dtype=object)


def _holds_indices(df: pd.DataFrame, model_cfg: ModelConfig) -> bool:
    """Whether the frame is a store window or reference sample of a multiclass model (targets are
    class indices): it has the ``__proba_<i>`` column of every class (a task without them: never)."""
    columns = model_cfg.kind.proba_columns(model_cfg.n_classes)
    return bool(columns) and all(c in df.columns for c in columns)


def target_values(raw: pd.Series, model_cfg: ModelConfig, what: str = "training data", *,
                  indices: bool = False) -> pd.Series:
    """The target as the model learns it: int64 0/1 (binary), int64 class indices into
    ``model.classes`` (multiclass; ``indices``: the values already are indices) or float64
    (regression). DataError naming the column, the count and the first bad row otherwise, and
    when fewer than two classes (two values) are present (the task's ``target_values``)."""
    return model_cfg.kind.target_values(raw.reset_index(drop=True), model_cfg.target, model_cfg.classes, what,
                                        indices=indices)


def split(df: pd.DataFrame, fraction: float, target: str, seed: int, *, what: str = "data",
          part: str = "validation", task: str = "binary",
          classes: Sequence[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(rest, held_out)`` with about ``fraction`` of the rows held out: stratified by class for
    a classifier (``fraction`` of each class), plain random for regression (the task's ``hold_out``).

    A class with too few rows to be on both sides stays on the training side (a warning), unless
    that leaves a side with a single class: the held-out metrics would then mean nothing (and a
    binary split needs both classes on both sides).

    The warning names a multiclass class by its name: ``classes``, else the names
    :func:`check_frame` left with the frame; the index only when neither is known."""
    names = list(classes or df.attrs.get(CLASSES_ATTR) or [])
    mask, kept = task_of(task).hold_out(df[target].to_numpy(), fraction, np.random.default_rng(seed), what, part,
                                        names)
    if kept:
        log.warning("%s: class(es) %s have too few rows for a %s set; kept on the training side only",
                    what, ", ".join(f"{_class_name(cls, names)} ({n} row(s))" for cls, n in kept), part)
    return df[~mask].reset_index(drop=True), df[mask].reset_index(drop=True)


def _class_name(cls: object, names: list[str]) -> str:
    """A class as the user names it: ``names[cls]`` for a class index, else the value as it is."""
    try:
        index = int(cls)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return str(cls)
    return str(names[index]) if index == cls and 0 <= index < len(names) else str(cls)


def tensors(model, df: pd.DataFrame, target: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x_num, x_cat, y)``: y float32 0/1 (binary), int64 class indices (multiclass), or the
    standardised target as float32 (regression: what the network learns, see trainer/model.py)."""
    x_num, x_cat = model.encode(df)
    # The task's, not the model's: a warm start may train a champion pickled with older code.
    return x_num, x_cat, task_of(getattr(model, "task", "binary")).target_tensor(model, df[target].to_numpy())


def fingerprint(*frames: pd.DataFrame) -> str:
    """A short content hash of the training rows, so a checkpoint is never resumed on other data."""
    h = hashlib.sha256()
    for df in frames:
        try:
            hashed = pd.util.hash_pandas_object(df, index=False)
        except TypeError:  # embedding columns hold arrays, which pandas cannot hash: their float32 bytes
            hashed = pd.util.hash_pandas_object(df.assign(**{
                c: [v if not isinstance(v, (np.ndarray, list)) else np.asarray(v, np.float32).tobytes() for v in df[c]]
                for c in df.columns if df[c].dtype == object}), index=False)
        h.update(hashed.to_numpy().tobytes())
        h.update(",".join(map(str, df.columns)).encode())
    return h.hexdigest()[:16]
