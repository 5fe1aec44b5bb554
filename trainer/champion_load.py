"""Loading a registered version for serving: the model with its baseline, through a small cache
of loaded versions, since the daemon asks for the champion on every check.

:func:`trainer.registry.load_champion` finds the champion's version and loads it here;
:mod:`trainer.registry` re-exports ``load_version`` and ``ChampionCache``. This module names the
registry in annotations only, so the two do not import each other.
"""
from __future__ import annotations

import json
import os
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from monitor.config import DriftloopConfig
from trainer.model_log import BASELINE_DIR
from trainer.outcomes import Baseline, Champion

if TYPE_CHECKING:
    from trainer.registry import Registry


class ChampionCache:
    """Loaded champions by (store, model, version): the daemon asks every check; loading is seconds."""

    def __init__(self, size: int = 4):
        self.size = size
        self._items: OrderedDict[tuple[str, str, str], Champion] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> Champion | None:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
            return self._items.get(key)

    def put(self, key: tuple[str, str, str], champion: Champion) -> None:
        with self._lock:
            self._items[key] = champion
            while len(self._items) > self.size:
                self._items.popitem(last=False)


_default_cache = ChampionCache()


def load_cached(cfg: DriftloopConfig, registry: Registry, version: str,
                cache: ChampionCache | None = None) -> Champion:
    """Version ``version`` from ``cache`` (the process's own when None), loaded and kept on a miss."""
    cache = _default_cache if cache is None else cache
    key = (cfg.tracking_uri, registry.name, version)
    cached = cache.get(key)
    if cached is not None:
        return cached
    champion = load_version(cfg, registry, version)
    cache.put(key, champion)
    return champion


def load_version(cfg: DriftloopConfig, registry: Registry, version: str) -> Champion:
    """A registered version with its baseline (the model behind any alias, or none)."""
    import mlflow
    import mlflow.pyfunc
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # no tqdm bars in daemon logs
    run_id = registry.run_id_of(version)
    with tempfile.TemporaryDirectory() as tmp:
        # Resolve the version to its artifact location ourselves: a models:/ URI would be resolved
        # against the process-wide registry URI, not this store.
        source = registry.client.get_model_version_download_uri(registry.name, version)
        local = mlflow.artifacts.download_artifacts(artifact_uri=source,
                                                    dst_path=str(Path(tmp) / "model"), tracking_uri=cfg.tracking_uri)
        model = mlflow.pyfunc.load_model(local).unwrap_python_model().model
        base = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=BASELINE_DIR,
                                                   dst_path=str(Path(tmp) / "baseline"), tracking_uri=cfg.tracking_uri)
        reference = pd.read_parquet(Path(base) / "reference.parquet")
        metrics = json.loads((Path(base) / "metrics.json").read_text())
        intervals_file = Path(base) / "intervals.json"  # absent for a baseline logged before it was recorded
        intervals = json.loads(intervals_file.read_text()) if intervals_file.exists() else {}
    model.eval()
    return Champion(version=version, run_id=run_id, predict_proba=model.predict_proba,
                    baseline=Baseline(reference=reference, metrics=metrics, intervals=intervals), model=model)
