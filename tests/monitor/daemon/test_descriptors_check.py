"""Text descriptors through the daemon's check (drift.descriptors): a real TopicBag champion (its own
vocabulary saved as a training.entrypoint artifact), its predictions scored by the model service's
``Champion`` and stored, and :class:`CheckJob` with the daemon's evaluator. A window whose messages
use the topics' new words raises the out-of-vocabulary share, measured against the champion's
vocabulary, and flags it; a stationary window flags no descriptor."""
from __future__ import annotations

import shutil
import time
from pathlib import Path

import pandas as pd
import pytest

from examples.text.corpus import CLASSES, corpus
from monitor.config import DriftloopConfig, load_config
from monitor.daemon.runtime.checks import CheckJob
from monitor.daemon.runtime.facade import default_champion
from monitor.drift import DriftEvaluator
from monitor.store import PredictionStore
from tests.monitor.drift.test_metrics import samples, scrape
from tests.trainer.conftest import mlflow_template, one_torch_thread  # noqa: F401  (fixtures)

OOV = "descriptor:text_oov_ratio"


def messages(folder: Path, n: int, seed: int, shift: float = 0.0) -> pd.DataFrame:
    """``n`` support messages as text files: request_id, input_uri, label."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = corpus(n, seed=seed, shift=shift)
    uris = []
    for rid, text in zip(rows["request_id"], rows["text"]):
        path = folder / f"{rid}.txt"
        path.write_text(text)
        uris.append(path.as_uri())
    return pd.DataFrame({"request_id": [f"{seed}-{r}" for r in rows["request_id"]], "input_uri": uris,
                         "label": rows["label"]})


def topics_config(tmp_path: Path, template: Path, descriptors: dict | None) -> DriftloopConfig:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(template, home / "mlflow.db")
    return load_config(path=None, environ={}, overrides={
        "home": str(home),
        "model": {"name": "topics", "task": "multiclass", "classes": CLASSES, "target": "label", "id": "request_id",
                  "features": [{"name": "text_emb", "type": "embedding", "dim": 32}],
                  "input_roots": [str(tmp_path / "messages")]},
        "training": {"entrypoint": "examples.text.network:TopicBag", "epochs": 4, "batch_size": 32,
                     "learning_rate": 0.05, "min_rows": 100, "reference_sample": 400, "threads": 1,
                     "progress": False, "export": {"onnx": False}, "try_previous_versions": 0},
        "drift": {"window_size": 400, "min_labels": 1000, "labelled_window": False, "workspace": "",
                  **({"descriptors": descriptors} if descriptors else {})},
        "server": {"gpu_metrics": False}})


def log_scored(cfg: DriftloopConfig, store: PredictionStore, requests: pd.DataFrame, start: float) -> None:
    """Score ``requests`` as a model service does (the registered pyfunc) and store the rows."""
    from monitor.client import Champion
    with Champion(cfg.tracking_uri, cfg.registered_model_name, interval=3600) as champion:
        version, output = champion.score(requests[["request_id", "input_uri"]])
    rows = requests[["request_id", "input_uri"]].join(output)
    rows["ts"] = start + pd.RangeIndex(len(rows)).to_numpy() * 0.5
    store.add_predictions(rows, model_version=version)


@pytest.mark.slow
def test_a_vocabulary_shift_raises_the_oov_descriptor_against_the_champions_vocabulary(tmp_path, mlflow_template):
    import trainer
    cfg = topics_config(tmp_path, mlflow_template, {"text": "input_uri"})
    folder = tmp_path / "messages"
    trainer.train_baseline(cfg, messages(folder / "train", 500, seed=1))
    job = CheckJob(cfg, PredictionStore.from_config(cfg), default_champion(cfg), DriftEvaluator(),
                   lambda result, ts: (None, None))
    store = job._store
    try:
        t0 = time.time() - 10_000
        log_scored(cfg, store, messages(folder / "live", 400, seed=2), t0)
        steady = job.run()
        log_scored(cfg, store, messages(folder / "shifted", 400, seed=3, shift=0.8), t0 + 1000)
        shifted = job.run()
    finally:
        store.close()

    assert steady.status == "ok" and shifted.status == "ok", (steady.message, shifted.message)
    before, after = steady.judged, shifted.judged
    described = [f for f in before.features if f.name.startswith("descriptor:")]
    assert [f.name for f in described] == ["descriptor:text_chars", "descriptor:text_words", OOV,
                                          "descriptor:text_non_ascii_ratio"]
    assert not any(f.drifted for f in described), [(f.name, f.score) for f in described]
    (text,) = before.descriptors.kinds
    assert text.vocabulary.source == "artifact:vocabulary.json" and len(text.vocabulary) > 50
    assert text.reference.read == 400 and text.current.read == 400 and not text.current.unread

    oov = after.feature(OOV)
    assert oov.drifted and oov.details["current_mean"] > 0.1 > 0.01 > before.feature(OOV).details["current_mean"]
    assert OOV in after.drifted_features
    # Not counted in the drift share unless drift.descriptors.drift_share says so.
    assert after.drift_share == (1.0 if after.feature("text_emb").drifted else 0.0)
    body = after.to_dict()
    assert body["descriptors"]["kinds"][0]["vocabulary"]["source"] == "artifact:vocabulary.json"
    assert {f["name"] for f in body["features"]} >= {"text_emb", OOV}
    # /metrics, from the check outcome as the daemon hands it over: every sampled input read.
    got = {(name, tuple(v for k, v in labels if k != "model")): value
           for (name, labels), value in samples(scrape(lambda: shifted)).items()
           if name.startswith("driftloop_model_descriptor_")}
    assert got[("driftloop_model_descriptor_rows", ("text", "current"))] == 400
    assert got[("driftloop_model_descriptor_rows", ("text", "reference"))] == 400
    assert got[("driftloop_model_descriptor_skipped", ("text",))] == 0
    unread = {k: v for k, v in got.items() if k[0] == "driftloop_model_descriptor_unread_rows"}
    assert len(unread) == 10 and set(unread.values()) == {0}
