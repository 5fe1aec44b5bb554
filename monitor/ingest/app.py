"""The ingestion HTTP API: ``POST /v1/predictions``, ``POST /v1/labels``, ``GET /healthz``, ``GET /metrics``.

The write routes read the raw body and hand it to a worker thread that parses it with orjson,
validates it column-wise and stores it in one transaction, so the event loop stays free for other
requests and no per-record pydantic model sits on the hot path. Every refusal is a JSON body
``{"error": ..., "errors": [{"index", "field", "message"}]}`` with a 4xx status; a store that cannot
be reached is a 503 with ``Retry-After`` (the batch may be re-sent: ids make it idempotent).

The daemon adds its own routers to the app returned by :func:`create_app`, protecting writes with
``Depends(monitor.ingest.security.require_token)``.
"""
from __future__ import annotations

import logging
import time
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from monitor.config import DriftloopConfig
from monitor.errors import ConflictError, StoreError, ValidationError
from monitor.ingest import openapi, parsing, security
from monitor.ingest.metrics import IngestMetrics

log = logging.getLogger(__name__)

_KIND_BY_PATH = {"/v1/predictions": "prediction", "/v1/labels": "label"}
# Batches processed at once; more would only queue on the store's write lock while holding memory.
INGEST_CONCURRENCY = 4


def _error(status: int, message: str, errors: list[dict] | None = None,
           headers: dict[str, str] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"error": message}
    if errors is not None:
        body["errors"] = errors
    return JSONResponse(body, status_code=status, headers=headers)


class IngestHandler:
    """Authenticates, parses, validates and stores one batch; turns each failure into its status."""

    def __init__(self, cfg: DriftloopConfig, store: Any, metrics: IngestMetrics):
        self.store = store
        self.metrics = metrics
        self.token = cfg.server.token
        self.max_body = cfg.server.max_body_bytes
        self.max_records = cfg.server.max_batch_records
        self._limiter: anyio.CapacityLimiter | None = None

    async def handle(self, request: Request, kind: str) -> Response:
        started = time.perf_counter()
        authorization = request.headers.get("authorization")
        if not security.token_matches(self.token, authorization):
            self.metrics.rejected(kind, "unauthorized")
            return _error(401, security.unauthorized_message(authorization), headers=security.UNAUTHORIZED_HEADERS)
        try:
            media = parsing.media_type(request.headers.get("content-type"))
            body = parsing.decode(await request.body(), request.headers.get("content-encoding"), self.max_body)
        except parsing.BodyError as exc:
            self.metrics.rejected(kind, exc.reason)
            return _error(exc.status, str(exc))
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(INGEST_CONCURRENCY)
        count = [0]
        try:
            result = await anyio.to_thread.run_sync(self._store, body, media, kind, count, limiter=self._limiter)
        except parsing.BodyError as exc:
            self.metrics.rejected(kind, exc.reason)
            return _error(exc.status, str(exc))
        except ConflictError as exc:
            self.metrics.rejected(kind, "conflict", count[0], time.perf_counter() - started)
            return _error(409, str(exc), exc.errors)
        except ValidationError as exc:
            self.metrics.rejected(kind, "validation", count[0], time.perf_counter() - started)
            return _error(422, str(exc), exc.errors)
        except StoreError as exc:
            self.metrics.rejected(kind, "unavailable")
            log.warning("ingest of %d %s records failed: %s", count[0], kind, exc)
            return _error(503, f"the store is unavailable; retry later ({exc})", headers={"Retry-After": "1"})
        self.metrics.accepted(kind, result.stored, result.duplicates, time.perf_counter() - started)
        return JSONResponse(result.to_dict())

    def _store(self, body: bytes, media: str, kind: str, count: list[int]) -> Any:
        records = parsing.parse_records(body, media)
        count[0] = len(records)
        if len(records) > self.max_records:
            raise parsing.BodyError(413, "too_large", f"the batch has {len(records)} records; the limit is "
                                    f"{self.max_records} (server.max_batch_records): split it")
        if kind == "prediction":
            return self.store.add_predictions(records)
        return self.store.add_labels(records)


def create_app(cfg: DriftloopConfig, store: Any, registry: CollectorRegistry | None = None) -> FastAPI:
    """The ingestion app for ``store`` (a :class:`monitor.store.PredictionStore`). Its self-metrics
    are registered in ``registry`` (a fresh one when None), which ``/metrics`` serves whole."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        app_version = version("driftloop")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
        app_version = "0"
    app = FastAPI(title="driftloop", version=app_version,
                  description="Prediction and label ingestion, metrics and control of the driftloop daemon.")
    registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
    metrics = IngestMetrics(cfg.model.name, store.row_counts)
    registry.register(metrics)
    app.state.store = store
    app.state.registry = registry
    app.state.ingest_metrics = metrics

    def on_too_large(path: str) -> None:
        if path in _KIND_BY_PATH:
            metrics.rejected(_KIND_BY_PATH[path], "too_large")

    security.install(app, cfg.server.token, cfg.server.max_body_bytes, on_too_large)
    handler = IngestHandler(cfg, store, metrics)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        # One error shape for every endpoint (the daemon's routers too): {"error", "errors"}.
        return _error(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def request_invalid(request: Request, exc: RequestValidationError) -> Response:
        errors = [{"field": ".".join(str(p) for p in e["loc"][1:]) or str(e["loc"][0]), "message": e["msg"]}
                  for e in exc.errors()]
        return _error(422, "invalid request: " + "; ".join(f"{e['field']}: {e['message']}" for e in errors), errors)

    @app.post("/v1/predictions", tags=["ingestion"], summary="Store a batch of predictions",
              responses=openapi.RESPONSES,
              openapi_extra=openapi.request_body(openapi.prediction_schema(cfg.model), openapi.prediction_example(cfg.model)))
    async def post_predictions(request: Request) -> Response:
        """A JSON list of prediction records (or `{"records": [...]}`), or NDJSON. The batch is
        validated whole and stored atomically; ids already stored with the same content count as
        duplicates."""
        return await handler.handle(request, "prediction")

    @app.post("/v1/labels", tags=["ingestion"], summary="Store a batch of true labels",
              responses=openapi.RESPONSES,
              openapi_extra=openapi.request_body(openapi.label_schema(cfg.model), openapi.label_example(cfg.model)))
    async def post_labels(request: Request) -> Response:
        """Labels joined to predictions by id, whichever arrives first."""
        return await handler.handle(request, "label")

    @app.get("/v1/schema", tags=["ingestion"], summary="The model's columns: features, id, target, score, prediction")
    def model_schema() -> Response:
        """What clients need to turn a DataFrame into records (monitor.client reads it once)."""
        m = cfg.model
        return JSONResponse({"model": m.name, "features": [{"name": f.name, "type": f.type} for f in m.features],
                             "id": m.id, "target": m.target, "score": m.score, "prediction": m.prediction,
                             "threshold": m.threshold})

    @app.get("/healthz", tags=["operations"], summary="Liveness and store reachability")
    def healthz() -> Response:
        try:
            store.ping()
        except StoreError as exc:
            return JSONResponse({"status": "unavailable", "error": str(exc)}, status_code=503)
        return JSONResponse({"status": "ok", "model": cfg.model.name, "store": store.engine.dialect.name})

    @app.get("/metrics", tags=["operations"], summary="Prometheus metrics", include_in_schema=True)
    def prometheus_metrics(request: Request) -> Response:
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encoder(registry), media_type=content_type)

    return app
