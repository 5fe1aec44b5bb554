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

import gzip
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from monitor.config import DriftloopConfig
from monitor.errors import ConflictError, Outage, StoreError, ValidationError
from monitor.ingest import memory, openapi, parsing, security
from monitor.ingest.health import Readiness, SpaceGuard
from monitor.ingest.scrape import Snapshots
from monitor.ingest.metrics import IngestMetrics
from monitor.ingest.responses import (FULL_RETRY_AFTER_SECONDS, RETRY_AFTER_SECONDS, dependency_down,
                                      error_response, install_error_handlers, public_message, unavailable)
from monitor.store.engine import bounded_wait, lock_contended, probe_write_lock, request_wait

log = logging.getLogger(__name__)

_KIND_BY_PATH = {"/v1/predictions": "prediction", "/v1/labels": "label"}
# Batches processed at once; more would only queue on the store's write lock while holding memory.
INGEST_CONCURRENCY = 4
# Large bodies (parsing.CHUNKED_BYTES or more) parsed and validated at once. Parsing holds the GIL,
# so more at once would not go faster; each costs up to about twice its body, and one that cannot
# be cut (parsed whole) 6 to 15 times.
LARGE_PARSES = 2
# The least a batch that waited for a worker still waits for the store's lock (a free lock takes none).
MIN_STORE_WAIT_SECONDS = 0.05
# How long /metrics waits for a collection (which reads the store) before answering without it, as
# /readyz waits for its checks store.request_wait_seconds: a probe or a scrape must not wait out a
# locked store's busy timeout. (/readyz waited 0.8 s: at load ~20 it answered in 1.1-1.4 s.)
METRICS_WAIT_SECONDS = 0.5


@dataclass
class Received:
    """What the worker learnt of one request's body: for the metrics, and for RequestGate."""
    records: int = 0
    decoded_bytes: int = 0  # after inflating


class IngestHandler:
    """Authenticates, parses, validates and stores one batch; turns each failure into its status."""

    def __init__(self, cfg: DriftloopConfig, store: Any, metrics: IngestMetrics):
        self.store = store
        self.metrics = metrics
        self.max_body = cfg.server.max_body_bytes
        self.max_records = cfg.server.max_batch_records
        self._limiter: anyio.CapacityLimiter | None = None
        self._large_parses = threading.BoundedSemaphore(LARGE_PARSES)  # taken in worker threads
        # store.min_free_bytes, enforced here as well as in /readyz (statvfs at most once a second).
        probe = getattr(store, "space_problem", None)
        min_free = cfg.store.min_free_bytes
        self.space = SpaceGuard(lambda: probe(min_free) if probe is not None else None)
        # The version a record without model_version is stored with: the daemon's champion when it
        # arrived (set by the daemon; None keeps such rows "unknown").
        self.assumed_version: Callable[[], str | None] = lambda: None

    async def handle(self, request: Request, kind: str) -> Response:
        # The token was checked by security.RequestGate before the body was read.
        started = time.perf_counter()
        try:
            media = parsing.media_type(request.headers.get("content-type"))
            body = await request.body()
            encoding = request.headers.get("content-encoding")
            if encoding is not None:  # unsupported encodings answered here; gzip is inflated in the worker
                parsing.check_encoding(encoding)
        except parsing.BodyError as exc:
            self.metrics.rejected(kind, exc.reason)
            return error_response(exc.status, str(exc))
        problem = self.space.problem()
        if problem is not None:
            self.metrics.rejected(kind, "unavailable")
            said = (f"the store cannot take writes; retry later ({problem})" if security.trusted(request)
                    else public_message("the store", problem.kind))
            return unavailable(said, problem.kind, FULL_RETRY_AFTER_SECONDS)
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(INGEST_CONCURRENCY)
        seen = Received()
        try:
            result = await self._in_worker(body, encoding, media, kind, seen)
        except (parsing.BodyError, ConflictError, ValidationError, StoreError) as exc:
            # Carried back from the worker thread by an asyncio future, a refusal, its traceback and
            # that future form a cycle holding the worker's frames (the inflated body, the parsed
            # columns) until a full collection: 200 MiB and more after a burst of refused large
            # bodies. A refusal is an answer, not a bug: its traceback is dropped.
            exc.__traceback__ = None
            return self._refusal(request, kind, exc, seen, started)
        finally:
            if seen.decoded_bytes >= memory.LARGE_BODY_BYTES:  # a large body, maybe from small gzip bytes:
                request.scope[memory.LARGE_BODY_SCOPE] = True  # RequestGate gives memory back after the burst
        self.metrics.accepted(kind, result.stored, result.duplicates, time.perf_counter() - started)
        return JSONResponse(result.to_dict())

    def _refusal(self, request: Request, kind: str, exc: Exception, seen: Received, started: float) -> Response:
        if isinstance(exc, parsing.BodyError):
            self.metrics.rejected(kind, exc.reason)
            return error_response(exc.status, str(exc))
        if isinstance(exc, ConflictError):
            self.metrics.rejected(kind, "conflict", seen.records, time.perf_counter() - started)
            return error_response(409, str(exc), exc.errors)
        if isinstance(exc, ValidationError):
            self.metrics.rejected(kind, "validation", seen.records, time.perf_counter() - started)
            return error_response(422, str(exc), exc.errors)
        assert isinstance(exc, StoreError)
        self.metrics.rejected(kind, "unavailable")
        log.warning("ingest of %d %s records failed: %s", seen.records, kind, exc)
        return dependency_down(request, exc)

    async def _in_worker(self, body: bytes, encoding: str | None, media: str, kind: str, seen: Received) -> Any:
        """:meth:`_store` in a worker thread, one of :data:`INGEST_CONCURRENCY`. While the store is
        locked from outside (:func:`~monitor.store.engine.lock_contended`), the wait for a worker
        and the wait for the lock share the request's ``store.request_wait_seconds``: a batch queued
        behind others that are waiting out the lock is refused when that time is up, instead of
        waiting its turn and then the lock again (at load ~20, 16 clients queued this way took
        2-3 s for their 503), and the lock is tried before the body is parsed (a parse that ends in
        a 503 takes the CPU the other requests need). Otherwise a batch waits its turn as long as
        it takes."""
        assert self._limiter is not None
        wait = request_wait()
        if wait is None or not lock_contended(self.store.engine):
            return await anyio.to_thread.run_sync(self._store, body, encoding, media, kind, seen,
                                                  limiter=self._limiter)
        queued = time.monotonic()
        acquired = False
        with anyio.move_on_after(wait):  # around the queueing only: a batch being stored is never abandoned
            await self._limiter.acquire()
            acquired = True
        if not acquired:
            raise StoreError(f"the store is locked; no worker was free within {wait:g} s "
                             "(store.request_wait_seconds)", kind=Outage.LOCKED)
        try:
            left = max(MIN_STORE_WAIT_SECONDS, wait - (time.monotonic() - queued))
            with bounded_wait(left):
                return await anyio.to_thread.run_sync(self._store, body, encoding, media, kind, seen, True)
        finally:
            self._limiter.release()

    def _store(self, raw: bytes, encoding: str | None, media: str, kind: str, seen: Received,
               locked: bool = False) -> Any:
        # Inflated and parsed here, under the worker limiter (INGEST_CONCURRENCY at once), not on
        # the event loop: their memory is bounded with the request's slot (security.RequestGate).
        if locked:  # the store was locked a moment ago: see whether it still is before parsing
            probe_write_lock(self.store.engine)  # StoreError (503) without the CPU of a parse
        body = parsing.decode(raw, encoding, self.max_body)
        seen.decoded_bytes = len(body)
        large = len(body) >= parsing.CHUNKED_BYTES
        records = self._validated(body, media, kind, seen) if large else \
            parsing.parse_records(body, media, self.max_records)
        del body  # an inflated body is not needed by the store
        try:
            if not large:
                seen.records = len(records)
                parsing.check_count(len(records), self.max_records)
            if kind == "prediction":
                return self.store.add_predictions(records, assumed_version=self.assumed_version())
            return self.store.add_labels(records)
        finally:
            del records  # a refusal's traceback keeps this frame, not the parsed batch

    def _validated(self, body: bytes, media: str, kind: str, seen: Received) -> Any:
        """A large body's validated batch (the store's validator), parsed a chunk at a time
        (:class:`~monitor.ingest.parsing.ChunkedBody`; a body it cannot cut is parsed whole), at most
        :data:`LARGE_PARSES` at once. Parsed whole, a batch costs 6-15 times its body; in chunks,
        its columns cost 1.3-2.1 times (docs/operations/faults.md#memory-under-hostile-uploads)."""
        validator = self.store.validator
        validate = validator.predictions if kind == "prediction" else validator.labels
        with self._large_parses:
            chunks = parsing.ChunkedBody(body, media, self.max_records)
            try:
                return validate(chunks)
            except parsing.Unsplittable:
                pass  # the partial columns go with the exception, before the body is parsed whole
            finally:
                seen.records = chunks.count
            del chunks
            records = parsing.parse_records(body, media, self.max_records)
            try:
                seen.records = len(records)
                parsing.check_count(len(records), self.max_records)
                return validate(records)
            finally:
                del records


def create_app(cfg: DriftloopConfig, store: Any, registry: CollectorRegistry | None = None) -> FastAPI:
    """The ingestion app for ``store`` (a :class:`monitor.store.PredictionStore`). Its self-metrics
    are registered in ``registry`` (a fresh one when None), which ``/metrics`` serves whole.
    ``app.state.readiness`` holds the readiness checks (``store``); the daemon adds its own.
    Raises the process's first garbage-collection threshold for batch-sized allocations
    (:func:`monitor.ingest.memory.size_collector`) and fixes glibc's trim and mmap thresholds, so
    that memory returns after large bodies (:func:`monitor.ingest.memory.tune_allocator`)."""
    memory.size_collector()
    memory.tune_allocator()
    from importlib.metadata import PackageNotFoundError, version
    try:
        app_version = version("driftloop")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
        app_version = "0"
    # No trailing-slash redirects: an API path is exact (a 307 to the slashless path would be built
    # from the client's Host header, and in a fleet from the path with /v1/models/<name> taken off).
    app = FastAPI(title="driftloop", version=app_version, redirect_slashes=False,
                  description="Prediction and label ingestion, metrics and control of the driftloop daemon.")
    registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
    readiness = Readiness({"store": lambda: store.check_writable(cfg.store.min_free_bytes)})
    metrics = IngestMetrics(cfg.model.name, store.row_counts, writable=lambda: readiness.ok("store"))
    registry.register(metrics)
    app.state.store = store
    app.state.registry = registry
    app.state.ingest_metrics = metrics
    app.state.readiness = readiness
    snapshots = Snapshots(registry, cfg.model.name, wait=METRICS_WAIT_SECONDS)

    def on_reject(path: str, reason: str) -> None:
        if path in _KIND_BY_PATH:
            metrics.rejected(_KIND_BY_PATH[path], reason)

    security.install(app, cfg.server, on_reject)
    handler = IngestHandler(cfg, store, metrics)
    app.state.ingest_handler = handler
    install_error_handlers(app)

    @app.post("/v1/predictions", tags=["ingestion"], summary="Store a batch of predictions",
              responses=openapi.RESPONSES,
              openapi_extra=openapi.request_body(openapi.prediction_schema(cfg.model),
                                                 openapi.prediction_example(cfg.model)))
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

    @app.get("/v1/schema", tags=["ingestion"],
             summary="The model's task, classes and columns, and its exact prediction and label records",
             responses={200: {"description": "The model's schema", "content": openapi.SCHEMA_RESPONSE}})
    def model_schema() -> Response:
        """What clients need to turn a DataFrame into records (monitor.client reads it once): the
        task (binary, multiclass or regression), the classes in order (a list of probabilities
        follows it), the features, the column names, and `records`, the JSON Schemas of this
        model's prediction and label records. The records of every task are in this document's
        `components/schemas` (`x-task`)."""
        return JSONResponse(openapi.schema_response(cfg.model))

    _with_task_components(app, cfg)

    @app.get("/livez", tags=["operations"], summary="Liveness: the process answers",
             responses={200: {"description": "Alive", "content": openapi.HEALTH}})
    async def livez() -> Response:
        """200 whenever the server answers at all; restart the process when this fails. Says
        nothing about the store or MLflow (see `/readyz`). Answered on the event loop: no worker
        thread (all of which may be waiting on a locked store) is needed, but a burst of large
        bodies delays it and the connection cap refuses it like any request: point liveness probes
        at `server.health_port`, answered by a process of its own."""
        return JSONResponse({"status": "ok"})

    async def ready(request: Request) -> Response:
        results = await readiness.results_within(cfg.store.request_wait_seconds)
        failing = {name: failure for name, failure in results.items() if failure is not None}
        body: dict[str, Any] = {"status": "unavailable" if failing else "ok", "model": cfg.model.name,
                                "store": store.engine.dialect.name,
                                "checks": {name: failure.kind.value if failure else "ok"
                                           for name, failure in results.items()}}
        if failing:
            # The reasons name paths, mount points and URLs: for the token's holders (and the log) only.
            if security.trusted(request):
                body["reasons"] = {name: failure.reason for name, failure in failing.items()}
                body["error"] = "; ".join(f"{name}: {failure.reason}" for name, failure in failing.items())
            else:
                body["error"] = "; ".join(public_message(f"the {name} check", failure.kind)
                                          for name, failure in failing.items())
            return JSONResponse(body, status_code=503, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
        return JSONResponse(body)

    ready_doc: dict[int | str, dict[str, Any]] = {200: {"description": "Ready", "content": openapi.HEALTH},
                 503: {"description": "Not ready; `checks` gives each check's kind (`locked`, `disk_full`, "
                       "`read_only`, `unreachable`, `no_answer`, `busy`); with the bearer token (or none "
                       "configured) `reasons` and `error` also name paths and exception texts",
                       "content": openapi.HEALTH}}

    @app.get("/readyz", tags=["operations"], summary="Readiness: the store takes writes (and MLflow answers)",
             responses=ready_doc)
    async def readyz(request: Request) -> Response:
        """503 with the reason while the store cannot take a write (down, read-only, full disk,
        locked beyond `store.busy_timeout_seconds`) or, in the daemon, MLflow cannot be used;
        also 503 when the checks do not answer within `store.request_wait_seconds` (0.5 s by
        default: a locked or slow store). Without the bearer token (when one is configured) the
        answer gives each failing check's kind only, never a path, mount point or exception text;
        open even with `server.protect_reads`."""
        return await ready(request)

    @app.get("/healthz", tags=["operations"], summary="Alias of /readyz", responses=ready_doc)
    async def healthz(request: Request) -> Response:
        """The same answer as `/readyz` (kept for existing health checks)."""
        return await ready(request)

    @app.get("/metrics", tags=["operations"], summary="Prometheus metrics", response_class=PlainTextResponse,
             responses={200: {"description": "Prometheus text exposition format",
                              "content": {"text/plain": {"schema": {"type": "string"}}}}})
    async def prometheus_metrics(request: Request) -> Response:
        """Not ``prometheus_client.make_asgi_app``: that collects on the event loop, and our collectors
        query the store (row counts; up to ``store.busy_timeout_seconds`` while it is locked). The
        registry is collected in its own thread (scrape.py), waited for at most 0.5 s, else the last
        collection is served with its age (``driftloop_store_stats_age_seconds``). The encoding and
        gzip follow ``make_asgi_app``'s (Prometheus asks for gzip)."""
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        body = encoder(await snapshots.current())  # type: ignore[arg-type]  # duck-typed registry
        if "gzip" in request.headers.get("accept-encoding", ""):
            return Response(gzip.compress(body), media_type=content_type, headers={"Content-Encoding": "gzip"})
        return Response(body, media_type=content_type)

    return app


def _with_task_components(app: FastAPI, cfg: DriftloopConfig) -> None:
    """The OpenAPI document also carries the prediction and label records of every task
    (``components/schemas``, :func:`monitor.ingest.openapi.task_components`); the request bodies
    stay those of the configured task, the only ones this server accepts."""
    build = app.openapi

    def document() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = build()
            spec.setdefault("components", {}).setdefault("schemas", {}).update(openapi.task_components(cfg.model))
        return app.openapi_schema or build()

    app.openapi = document  # type: ignore[method-assign]
