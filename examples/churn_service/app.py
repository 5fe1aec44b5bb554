"""A small model service monitored by driftloop: it scores with whatever version is champion now
and logs every prediction, and later every outcome, to the driftloop daemon.

    MLFLOW_TRACKING_URI=sqlite:///driftloop-data/mlflow.db MODEL_NAME=driftloop-churn \\
    DRIFTLOOP_URL=http://127.0.0.1:8470 uvicorn --factory examples.churn_service.app:app_from_environment --port 8000

    curl -s localhost:8000/predict -H 'Content-Type: application/json' \\
         -d '[{"customer_id": "c-1", "age": 40, "tenure": 3, "monthly_charges": null,
               "is_senior": false, "plan": "basic", "region": "east"}]'
    curl -s localhost:8000/outcomes -H 'Content-Type: application/json' \\
         -d '[{"customer_id": "c-1", "churned": 1}]'

Rows go in as the service receives them, missing values included: the model handles them, and
driftloop counts them. The record id is the table's own id column (``model.id``).
"""
from __future__ import annotations

import os
from typing import Any

import pandas as pd
from fastapi import FastAPI

from monitor.client import Champion, DriftloopClient


def create_app(champion: Champion, driftloop: DriftloopClient, id_column: str = "customer_id") -> FastAPI:
    app = FastAPI(title="churn model service")

    @app.post("/predict")
    def predict(rows: list[dict[str, Any]]) -> dict[str, Any]:
        frame = pd.DataFrame(rows)
        version, scores = champion.score(frame)  # one model scores the whole request
        frame["score"] = scores
        # Logged with the service's own column names (the daemon's GET /v1/schema maps them) and the
        # version that scored them, so each champion is judged on its own rows.
        driftloop.log_predictions(frame, model_version=version)
        return {"model_version": version,
                "scores": [{id_column: rid, "score": float(s)} for rid, s in zip(frame[id_column], scores)]}

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
                        os.environ.get("MODEL_NAME", "driftloop-churn"),
                        interval=float(os.environ.get("CHAMPION_POLL_SECONDS", "30")))
    driftloop = DriftloopClient(os.environ.get("DRIFTLOOP_URL", "http://127.0.0.1:8470"),
                                token=os.environ.get("DRIFTLOOP_TOKEN"))
    return create_app(champion, driftloop, os.environ.get("ID_COLUMN", "customer_id"))
