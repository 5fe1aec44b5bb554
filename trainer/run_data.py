"""The rows a training run learned from and was judged on, as MLflow dataset inputs whose source
reloads exactly those rows:

- rows read from a file (``driftloop train --data``, ``driftloop retrain --data``): the file's
  absolute path (MLflow's UI: source type *Local*, the path);
- rows from the store (the daemon's retrains, ``driftloop retrain``) or handed in as a DataFrame:
  the rows themselves, exported as Parquet artifacts of the run (``datasets/<context>.parquet``)
  while all of a run's exports together stay within :data:`DATASET_MAX_BYTES`; the source is the
  artifact's URI (a local file: *Local*; S3 and other object stores: their URI), or, with a
  tracking server that proxies artifacts (``mlflow-artifacts:``), its ``/get-artifact`` download
  link (*HTTP*, with an "Open dataset" button);
- a store window over the bound (or that could not be exported): the query that reads it again,
  ``driftloop://<model>/window?labelled=true&start=<first row>&end=<last row>&rows=<n>`` (both
  ends inclusive, ISO 8601 UTC; :class:`StoreWindowSource`, shown by the UI as a URL);
- in-process rows over the bound: MLflow's own code source (the script and commit that ran).

Exporting never fails a run: a description of its data is a courtesy, the run is the point.
"""
from __future__ import annotations

import logging
import tempfile
import warnings
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlencode

import pandas as pd
from mlflow.data.dataset_source import DatasetSource

from monitor.config import DriftloopConfig
from trainer import story

log = logging.getLogger(__name__)

# The Parquet bytes one run may export, all its datasets together (a window of training.max_rows,
# 50,000 rows of a few dozen numeric features, is a few MB; embeddings can take far more).
DATASET_MAX_BYTES = 64 * 2**20
DATASETS_DIR = "datasets"


class StoreWindowSource(DatasetSource):
    """Labelled rows of driftloop's store between two times: ``driftloop://<model>/window?...``.
    Source type ``external``, which MLflow's UI shows as a URL. Read it again with the store,
    ``PredictionStore.window(since=start, labelled_only=True)`` up to ``end`` inclusive."""

    def __init__(self, url: str):
        self._url = url

    @property
    def url(self) -> str:
        return self._url

    @staticmethod
    def _get_source_type() -> str:
        return "external"

    def load(self) -> Any:
        raise NotImplementedError("the store is read by driftloop, not by MLflow: see trainer/run_data.py")

    @staticmethod
    def _can_resolve(raw_source: Any) -> bool:
        return False  # made only here, never resolved from a string

    @classmethod
    def _resolve(cls, raw_source: Any) -> StoreWindowSource:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        return {"url": self._url}

    @classmethod
    def from_dict(cls, source_dict: dict[Any, Any]) -> StoreWindowSource:
        return cls(source_dict["url"])


def store_query(cfg: DriftloopConfig, frames: Mapping[str, pd.DataFrame], data_window: Any) -> StoreWindowSource:
    """The query that reads a store window again: its first and last row from the data window the
    daemon recorded, else from the rows' ``ts``."""
    span = data_window if isinstance(data_window, dict) else {}
    start, end = span.get("start") or span.get("since_change") or span.get("since"), span.get("end")
    stamps = [f["ts"] for f in frames.values() if "ts" in f.columns and len(f)]
    if stamps and not (start and end):
        ts = pd.to_datetime(pd.concat(stamps), utc=True)
        start, end = start or ts.min().isoformat(), end or ts.max().isoformat()
    query = {"labelled": "true", **({"start": str(start)} if start else {}), **({"end": str(end)} if end else {}),
             "rows": sum(len(f) for f in frames.values())}
    return StoreWindowSource(f"driftloop://{cfg.model.name}/window?{urlencode(query, safe=':+')}")


def _artifact_source(cfg: DriftloopConfig, path: str) -> DatasetSource | None:
    """The dataset source of the active run's artifact ``path``, or None when MLflow cannot name one."""
    import mlflow
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.http_dataset_source import HTTPDatasetSource
    uri = mlflow.get_artifact_uri(path)
    try:
        with warnings.catch_warnings():  # "can be interpreted in multiple ways": a local file is a local file
            warnings.simplefilter("ignore", UserWarning)
            return resolve_dataset_source(uri)
    except Exception:
        pass
    run = mlflow.active_run()
    if cfg.tracking_uri.startswith(("http://", "https://")) and run is not None:  # proxied: mlflow-artifacts:/...
        link = urlencode({"path": path, "run_uuid": run.info.run_id})
        return HTTPDatasetSource(f"{cfg.tracking_uri.rstrip('/')}/get-artifact?{link}")
    return None


def export(cfg: DriftloopConfig, frames: Mapping[str, pd.DataFrame],
           max_bytes: int | None = None) -> dict[str, DatasetSource] | None:
    """Each frame as ``datasets/<context>.parquet`` of the active run, and its source; None (nothing
    logged) when together they would pass ``max_bytes`` (:data:`DATASET_MAX_BYTES`) or cannot be written."""
    import mlflow
    max_bytes = DATASET_MAX_BYTES if max_bytes is None else max_bytes
    if sum(int(f.memory_usage(deep=True).sum()) for f in frames.values()) > 8 * max_bytes:
        return None  # not worth writing to find out: Parquet does not shrink numbers eightfold
    try:
        with tempfile.TemporaryDirectory() as tmp:
            total = 0
            for context, rows in frames.items():
                file = Path(tmp) / f"{context}.parquet"
                rows.to_parquet(file, index=False)
                total += file.stat().st_size
                if total > max_bytes:
                    log.info("datasets not exported with the run: %d+ bytes of Parquet > %d", total, max_bytes)
                    return None
            mlflow.log_artifacts(tmp, DATASETS_DIR)
        sources = {c: _artifact_source(cfg, f"{DATASETS_DIR}/{c}.parquet") for c in frames}
    except Exception as exc:
        log.warning("could not export the run's datasets: %s", exc)
        return None
    if any(s is None for s in sources.values()):
        return None
    return {c: s for c, s in sources.items() if s is not None}


def sources(cfg: DriftloopConfig, frames: Mapping[str, pd.DataFrame], *, path: str | Path | None = None,
            data_window: Any = None, from_store: bool = False) -> dict[str, Any]:
    """Context → dataset source for each frame (see the module docstring for which). ``path``: the
    file the rows were read from (else a ``{"source": "file", "path"}`` data window names it);
    ``from_store``: the rows are a store window (else in-process rows: no query reads them again)."""
    if path is None and isinstance(data_window, dict) and data_window.get("source") == "file":
        path = data_window.get("path")
    if path:
        absolute = str(Path(path).expanduser().resolve())
        return {c: absolute for c in frames}
    exported = export(cfg, frames)
    if exported is not None:
        return exported
    if from_store:
        query = store_query(cfg, frames, data_window)
        return {c: query for c in frames}
    return {c: None for c in frames}  # MLflow's code source: the script and commit that ran


def log_datasets(cfg: DriftloopConfig, frames: Mapping[str, tuple[str, pd.DataFrame]], *, target: str,
                 path: str | Path | None = None, data_window: Any = None, from_store: bool = False) -> None:
    """Log each ``context → (name, rows)`` as a dataset input of the active run, with a source that
    reloads the rows (:func:`sources`). Never raises."""
    try:
        found = sources(cfg, {c: rows for c, (_, rows) in frames.items()}, path=path, data_window=data_window,
                        from_store=from_store)
    except Exception as exc:
        log.warning("could not name the datasets' source: %s", exc)
        found = {c: None for c in frames}
    for context, (name, rows) in frames.items():
        story.log_dataset(rows, name=name, source=found[context], context=context, target=target)
