"""The text example's model service: it encodes each message with the fixed sentence encoder
(examples/text/encoder.py), scores the embedding with whatever version is champion now (driftloop's
own network on the ``text_emb`` embedding feature), and logs each prediction, embedding included,
to the driftloop daemon; the true topic follows later through ``/outcomes``.

    MLFLOW_TRACKING_URI=sqlite:///driftloop-data/mlflow.db MODEL_NAME=driftloop-topics \\
    DRIFTLOOP_URL=http://127.0.0.1:8470 uvicorn --factory examples.text.service:app_from_environment --port 8000

    curl -s localhost:8000/predict -H 'Content-Type: application/json' \\
         -d '[{"request_id": "m-1", "text": "my invoice is wrong again"}]'
    curl -s localhost:8000/outcomes -H 'Content-Type: application/json' -d '[{"request_id": "m-1", "label": "billing"}]'

The encoder is part of the service, not of the model: the embedding is the model's input *and*
the feature driftloop watches, and a retrain learns from the stored embeddings.
"""
from __future__ import annotations

import os
from typing import Any

import pandas as pd
from fastapi import FastAPI

from examples.text.encoder import embedding_column
from monitor.client import Champion, DriftloopClient
from monitor.tasks import PROBA_PREFIX

EMBEDDING = "text_emb"


def create_app(champion: Champion, driftloop: DriftloopClient, id_column: str = "request_id") -> FastAPI:
    app = FastAPI(title="text topic service")

    @app.post("/predict")
    def predict(rows: list[dict[str, Any]]) -> dict[str, Any]:
        frame = pd.DataFrame(rows)  # request_id, text
        frame[EMBEDDING] = embedding_column(frame["text"])
        version, output = champion.score(frame[[EMBEDDING]])  # the model's one input
        driftloop.log_predictions(frame.join(output), model_version=version)  # the text itself is not sent
        probabilities = output.filter(like=PROBA_PREFIX).rename(columns=lambda c: c.removeprefix(PROBA_PREFIX))
        return {"model_version": version,
                "predictions": [{id_column: rid, "class": cls, "probabilities": p}
                                for rid, cls, p in zip(frame[id_column], output["prediction"],
                                                       probabilities.to_dict("records"))]}

    @app.post("/outcomes")
    def outcomes(rows: list[dict[str, Any]]) -> dict[str, Any]:
        summary = driftloop.log_labels(pd.DataFrame(rows))
        return {"stored": summary.stored, "duplicates": summary.duplicates}

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "model_version": champion.version, "follow_error": champion.last_error}

    return app


def app_from_environment() -> FastAPI:
    champion = Champion(os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///driftloop-data/mlflow.db"),
                        os.environ.get("MODEL_NAME", "driftloop-topics"),
                        interval=float(os.environ.get("CHAMPION_POLL_SECONDS", "30")))
    driftloop = DriftloopClient(os.environ.get("DRIFTLOOP_URL", "http://127.0.0.1:8470"),
                                token=os.environ.get("DRIFTLOOP_TOKEN"))
    return create_app(champion, driftloop, os.environ.get("ID_COLUMN", "request_id"))
