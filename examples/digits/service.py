"""The digits model service monitored by driftloop: it scores images with whatever version is
champion now, answers each image's class and class probabilities, and logs each prediction to the
driftloop daemon with the CNN's embedding of the image (feature ``image_emb``) and the image's
``input_uri``; the true digit follows later through ``/outcomes``.

    MLFLOW_TRACKING_URI=sqlite:///driftloop-data/mlflow.db MODEL_NAME=driftloop-digits \\
    DRIFTLOOP_URL=http://127.0.0.1:8470 uvicorn --factory examples.digits.service:app_from_environment --port 8000

    curl -s localhost:8000/predict -H 'Content-Type: application/json' \\
         -d '[{"request_id": "q-1", "input_uri": "file:///data/digits/images/base/0000.png"}]'
    curl -s localhost:8000/outcomes -H 'Content-Type: application/json' \\
         -d '[{"request_id": "q-1", "label": "0"}]'

The champion is the registered pyfunc of a model trained through ``training.entrypoint``: given
rows with ``input_uri`` it reads the images (the entrypoint's ``dataset``) and returns, per row,
``prediction`` (the class), one ``proba_<class>`` column per class and ``image_emb`` (the
penultimate layer, a list of floats). Those are the columns ``log_predictions`` takes, so the rows
joined with the model's output go to driftloop as they are: the daemon stores the uri (it never
fetches it) and the embedding, and compares embeddings with the champion's reference for drift.
"""
from __future__ import annotations

import os
from typing import Any

import pandas as pd
from fastapi import FastAPI

from monitor.client import Champion, DriftloopClient
from monitor.tasks import PROBA_PREFIX

EMBEDDING = "image_emb"


def create_app(champion: Champion, driftloop: DriftloopClient, id_column: str = "request_id") -> FastAPI:
    app = FastAPI(title="digits model service")

    @app.post("/predict")
    def predict(rows: list[dict[str, Any]]) -> dict[str, Any]:
        frame = pd.DataFrame(rows)  # request_id, input_uri
        version, output = champion.score(frame)  # one model scores the whole request
        driftloop.log_predictions(frame.join(output), model_version=version)
        probabilities = output.filter(like=PROBA_PREFIX).rename(columns=lambda c: c.removeprefix(PROBA_PREFIX))
        return {"model_version": version,
                "predictions": [{id_column: rid, "class": cls, "probabilities": p}
                                for rid, cls, p in zip(frame[id_column], output["prediction"],
                                                       probabilities.to_dict("records"))]}

    @app.post("/outcomes")
    def outcomes(rows: list[dict[str, Any]]) -> dict[str, Any]:
        summary = driftloop.log_labels(pd.DataFrame(rows))  # the true digit, by class name
        return {"stored": summary.stored, "duplicates": summary.duplicates}

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "model_version": champion.version, "follow_error": champion.last_error}

    return app


def app_from_environment() -> FastAPI:
    champion = Champion(os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///driftloop-data/mlflow.db"),
                        os.environ.get("MODEL_NAME", "driftloop-digits"),
                        interval=float(os.environ.get("CHAMPION_POLL_SECONDS", "30")))
    driftloop = DriftloopClient(os.environ.get("DRIFTLOOP_URL", "http://127.0.0.1:8470"),
                                token=os.environ.get("DRIFTLOOP_TOKEN"))
    return create_app(champion, driftloop, os.environ.get("ID_COLUMN", "request_id"))
