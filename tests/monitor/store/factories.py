"""Records and model schemas for the store and ingestion tests."""
from __future__ import annotations

from monitor.config import ModelConfig

T0 = 1_790_000_000.0  # 2026-09-21T14:13:20Z


def small_model(name: str = "m", extra: list[dict] | None = None, drop: tuple[str, ...] = ()) -> ModelConfig:
    """Two numeric features and one categorical: enough to exercise every column type."""
    features = [{"name": "x0"}, {"name": "x1"}, {"name": "region", "type": "categorical"}]
    features = [f for f in features if f["name"] not in drop] + (extra or [])
    return ModelConfig.model_validate({"name": name, "features": features})


def prediction(i: int, prefix: str = "r", ts: float | None = T0, **over) -> dict:
    rec = {"id": f"{prefix}{i}", "features": {"x0": i * 0.5, "x1": -float(i), "region": ("eu", "us")[i % 2]},
           "score": (i % 10) / 10}
    if ts is not None:
        rec["ts"] = ts + i
    rec.update(over)
    return rec


def predictions(n: int, prefix: str = "r", start: int = 0, ts: float | None = T0) -> list[dict]:
    return [prediction(i, prefix, ts) for i in range(start, start + n)]


def labels(ids: list[str], ts: float | None = T0 + 3600) -> list[dict]:
    out = []
    for k, rid in enumerate(ids):
        rec = {"id": rid, "label": k % 2}
        if ts is not None:
            rec["ts"] = ts + k
        out.append(rec)
    return out
