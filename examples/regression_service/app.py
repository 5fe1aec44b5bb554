"""A regression model service monitored by driftloop: it scores with whatever version is champion
now, answers the predicted value, and logs each prediction, and later each true value, to the
driftloop daemon.

    MLFLOW_TRACKING_URI=sqlite:///driftloop-data/mlflow.db MODEL_NAME=driftloop-price \\
    DRIFTLOOP_URL=http://127.0.0.1:8470 uvicorn --factory examples.regression_service.app:app_from_environment \\
    --port 8000

    curl -s localhost:8000/predict -H 'Content-Type: application/json' \\
         -d '[{"request_id": "q-1", "x0": 0.3, "x1": -1.2, "x2": 0.5, "x3": 0.1, "x4": 1.0, "x5": 0.0,
               "x6": 0.2, "x7": null, "region": "eu", "device": "ios"}]'
    curl -s localhost:8000/outcomes -H 'Content-Type: application/json' \\
         -d '[{"request_id": "q-1", "price": 104.2}]'

The registered pyfunc returns one column, ``prediction``, the predicted value in the target's
units: the column ``log_predictions`` takes, so the features joined with the model's output go to
driftloop as they are.
"""
from __future__ import annotations

import os
from typing import Any

import pandas as pd
from fastapi import FastAPI

from monitor.client import Champion, DriftloopClient


def create_app(champion: Champion, driftloop: DriftloopClient, id_column: str = "request_id") -> FastAPI:
    app = FastAPI(title="regression model service")

    @app.post("/predict")
    def predict(rows: list[dict[str, Any]]) -> dict[str, Any]:
        frame = pd.DataFrame(rows)
        version, output = champion.score(frame)  # one model scores the whole request
        driftloop.log_predictions(frame.join(output), model_version=version)
        return {"model_version": version,
                "predictions": [{id_column: rid, "prediction": float(v)}
                                for rid, v in zip(frame[id_column], output["prediction"])]}

    @app.post("/outcomes")
    def outcomes(rows: list[dict[str, Any]]) -> dict[str, Any]:
        summary = driftloop.log_labels(pd.DataFrame(rows))  # the true value
        return {"stored": summary.stored, "duplicates": summary.duplicates}

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "model_version": champion.version, "follow_error": champion.last_error}

    return app


def app_from_environment() -> FastAPI:
    champion = Champion(os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///driftloop-data/mlflow.db"),
                        os.environ.get("MODEL_NAME", "driftloop-price"),
                        interval=float(os.environ.get("CHAMPION_POLL_SECONDS", "30")))
    driftloop = DriftloopClient(os.environ.get("DRIFTLOOP_URL", "http://127.0.0.1:8470"),
                                token=os.environ.get("DRIFTLOOP_TOKEN"))
    return create_app(champion, driftloop, os.environ.get("ID_COLUMN", "request_id"))
