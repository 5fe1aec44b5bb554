"""The HTTP face of a deployment of many models: one address, a path per model.

``/v1/models/{name}/…`` is model ``name``'s own API, the one a single-model daemon serves at
``/v1/…`` (``predictions``, ``labels``, ``schema``, ``status``, ``retrain``, ``reference/reset``,
``alerts``): the request goes to that model's app with the prefix taken off. The fleet's own routes:

* ``GET /v1/models``: every model with its task, champion, last check, open incident and whether it
  retrains; the retrain queue and the check pool. ``GET /v1/models/{name}``: one model's entry.
* ``GET /metrics``: every model's series (``model`` label) and the fleet's, one exposition.
* ``POST /v1/alerts``: Alertmanager's webhook for every model: each model acts on the alerts whose
  ``model`` label names it (``alerts.webhook_match`` as always); the answer lists each model's. A
  model another daemon leads (a shared PostgreSQL store) holds its alerts for that leader
  (``kind: queued``, state/inbox.py).

A deployment of one model also answers every path it always did (``/v1/predictions`` …) for that
model. With several, those per-model paths answer 404 naming ``/v1/models/{name}/…``; the
operational paths (``/livez``, ``/readyz``, ``/healthz``, ``/runbooks/…``, ``/docs``,
``/openapi.json``) are the first model's, whose checks (the shared store, MLflow) are everyone's.
"""
from __future__ import annotations

import gzip
from typing import TYPE_CHECKING, Any, Awaitable, Callable, MutableMapping

import anyio
from fastapi import Depends, FastAPI, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from monitor.logs import about_model

if TYPE_CHECKING:
    from monitor.daemon.runtime.fleet import Fleet

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]

PREFIX = "/v1/models"
# Paths every model app answers the same (probes, docs, runbooks): the first model's serve them.
SHARED_PATHS = frozenset({"/livez", "/readyz", "/healthz", "/docs", "/redoc", "/openapi.json",
                          "/docs/oauth2-redirect"})


def build_front(fleet: Fleet, model_app: Callable[[], Any] = lambda: None) -> FastAPI:
    """The fleet's own routes (see the module doc)."""
    from prometheus_client.exposition import choose_encoder

    from monitor.daemon.decisions.actions import TriggerAction, TriggerKind
    from monitor.daemon.runtime.alertmanager import WebhookPayload, select_alerts
    from monitor.daemon.runtime.triggers import TriggerResult
    from monitor.daemon.runtime.api import BadRequest, _error, parse_body
    from monitor.ingest import security
    from monitor.ingest.responses import install_error_handlers
    from monitor.ingest.scrape import Snapshots
    from monitor.ingest.security import require_token, trusted

    app = FastAPI(title="driftloop", description="Many models: /v1/models/{name}/… is each model's own API.",
                  redirect_slashes=False)
    security.install(app, fleet.cfg.server)
    install_error_handlers(app)
    snapshots = Snapshots(fleet.registry, lambda: fleet.names, wait=0.5)

    def public(entry: dict[str, Any], request: Request) -> dict[str, Any]:
        if trusted(request) or "error" not in entry:
            return entry
        return {**entry, "error": "hidden"}

    def document() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = fleet_openapi(app, model_app())
        return app.openapi_schema

    app.openapi = document  # type: ignore[method-assign]

    @app.get(PREFIX, tags=["models"], summary="The models this daemon hosts")
    async def models(request: Request) -> dict[str, Any]:
        body = await anyio.to_thread.run_sync(fleet.listing)
        body["models"] = [public(m, request) for m in body["models"]]
        return body

    @app.get(PREFIX + "/{name}", tags=["models"], summary="One model's entry of GET /v1/models")
    async def one_model(name: str, request: Request) -> Any:
        if name not in fleet.daemons and name not in fleet.failed:
            return unknown_model(name, fleet, request.scope)
        return public(await anyio.to_thread.run_sync(fleet.summary, name), request)

    @app.get("/metrics", tags=["operations"], summary="Prometheus metrics of every model",
             response_class=PlainTextResponse)
    async def metrics(request: Request) -> Response:
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        body = encoder(await snapshots.current())  # type: ignore[arg-type]  # duck-typed registry
        if "gzip" in request.headers.get("accept-encoding", ""):
            return Response(gzip.compress(body), media_type=content_type, headers={"Content-Encoding": "gzip"})
        return Response(body, media_type=content_type)

    @app.post("/v1/alerts", dependencies=[Depends(require_token)], tags=["models"],
              summary="Alertmanager webhook (version 4) for every model")
    async def alerts(request: Request) -> Any:
        try:
            payload = parse_body(await request.body(), WebhookPayload, "Alertmanager webhook payload (version 4)")
        except BadRequest as exc:
            return _error(exc)

        def each() -> tuple[dict[str, Any], int]:
            answers: dict[str, Any] = {}
            unavailable = 0
            for name, daemon in list(fleet.daemons.items()):
                chosen = select_alerts(payload, daemon.cfg.alerts.webhook_match, name)
                if not chosen.firing and not chosen.resolved:  # not this model's: nothing to ask MLflow about
                    answers[name] = TriggerResult(None, TriggerAction(TriggerKind.NOTHING), {
                        "firing": 0, "resolved": 0, "ignored": len(chosen.ignored)}).to_dict()
                    continue
                try:
                    with about_model(name):
                        answers[name] = daemon.handle_alerts(payload).to_dict()
                except Exception as exc:  # one model's MLflow or leadership: the others still act
                    unavailable += 1
                    answers[name] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            return answers, unavailable

        answers, unavailable = await anyio.to_thread.run_sync(each)
        # Alertmanager re-sends on a 5xx: whenever a model the alerts concern could not take them (the
        # models that did take them recognise the re-sent alerts: deliveries are deduplicated).
        status = 503 if unavailable else 200
        return JSONResponse({"models": answers}, status_code=status, headers={"Retry-After": "5"} if status == 503
                            else None)

    return app


def fleet_openapi(front: FastAPI, model_app: Any) -> dict[str, Any]:
    """The OpenAPI document of a deployment of several models: each per-model path of a model's own
    document under ``/v1/models/{name}``, the fleet's routes, and the operational paths. The record
    schemas of every task are in ``components`` (a model's own are those of its task: its
    ``GET /v1/models/{name}/schema``)."""
    from fastapi.openapi.utils import get_openapi

    own = get_openapi(title="driftloop", version=front.version, description=front.description, routes=front.routes)
    if model_app is None:
        return own
    model_doc = model_app.openapi()
    name_param = {"name": "name", "in": "path", "required": True, "description": "the model's name (GET /v1/models)",
                  "schema": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,47}$"}}
    paths: dict[str, Any] = {}
    for path, operations in model_doc.get("paths", {}).items():
        if path.startswith("/v1/") and path != "/v1/alerts":
            moved = {}
            for method, op in operations.items():
                op = {**op, "parameters": [name_param, *op.get("parameters", [])]}
                op.setdefault("responses", {}).setdefault("404", {"description": "No model of that name here"})
                moved[method] = op
            paths[PREFIX + "/{name}" + path[3:]] = moved
        elif path != "/metrics":
            paths[path] = operations
    paths.update(own.get("paths", {}))
    document = {**model_doc, "paths": paths, "info": {**model_doc.get("info", {}), "description": front.description}}
    components = document.setdefault("components", {}).setdefault("schemas", {})
    components.update(own.get("components", {}).get("schemas", {}))
    return document


def _trusted(fleet: Fleet, scope: Scope) -> bool:
    """Whether the caller carries the token (or none is set): only then does a 404 list the hosted
    models, or a 503 say why one did not start (``GET /v1/models`` itself needs the token when reads
    are protected, ``server.protect_reads``)."""
    from monitor.ingest.security import token_matches

    headers = dict(scope.get("headers") or [])
    authorization = headers.get(b"authorization", b"").decode("latin-1") or None
    return token_matches(fleet.cfg.server.token, authorization)


def _names(fleet: Fleet, scope: Scope) -> str:
    return (", ".join(fleet.names) or "none") if _trusted(fleet, scope) else "see GET /v1/models"


def unknown_model(name: str, fleet: Fleet, scope: Scope | None = None) -> JSONResponse:
    """404 for a name the daemon does not host; 503 for one it hosts but could not start (GET
    /v1/models lists it as failed): the sender's data is fine, the daemon is not (a client retries,
    then raises ServerUnavailable). The hosted names and the failure go only to a caller with the token."""
    trusted = scope is None or _trusted(fleet, scope)
    shown = name if len(name) <= 64 else name[:61] + "..."
    failure = fleet.failed.get(name)
    if failure is not None:
        why = f": {failure}" if trusted else ""
        return JSONResponse({"error": f"model {shown!r} is configured here but did not start{why} "
                                      "(fix its configuration and reload with SIGHUP; GET /v1/models)"},
                            status_code=503, headers={"Retry-After": "30"})
    hosted = _names(fleet, scope) if scope is not None else ", ".join(fleet.names) or "none"
    return JSONResponse({"error": f"no model {shown!r} here; this daemon hosts: {hosted} (GET /v1/models)"},
                        status_code=404)


def _encoded_slash(scope: Scope) -> bool:
    """Whether the model segment of the raw path hides a slash (``%2F``): the decoded path would
    split there, routing a request whose raw path names no model."""
    raw = scope.get("raw_path")
    if not isinstance(raw, bytes):
        return False
    segment = raw[len(PREFIX) + 1:].split(b"/", 1)[0]
    return b"%2f" in segment.lower()


class FleetApp:
    """The ASGI app ``serve`` runs for a fleet (routing in the module doc). ``apps``: each model's
    app (:meth:`Daemon.build_app`), rebuilt by :meth:`refresh` after a reload."""

    def __init__(self, fleet: Fleet):
        self.fleet = fleet
        self.apps: dict[str, ASGIApp] = {}
        self.front = build_front(fleet, lambda: next(iter(self.apps.values()), None))
        self.refresh()

    def refresh(self) -> None:
        apps: dict[str, ASGIApp] = {}
        for name, daemon in self.fleet.daemons.items():
            app = self.apps.get(name)
            # A rebuilt daemon (its configuration changed) needs a new app: compare by identity.
            if app is None or getattr(app, "_driftloop_daemon", None) is not daemon:
                app = daemon.build_app()
                app._driftloop_daemon = daemon  # type: ignore[attr-defined]
            apps[name] = app
        self.apps = apps

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self.front(scope, receive, send)
            return
        path: str = scope.get("path", "")
        if path.startswith(PREFIX + "/") and path.count("/") >= 4:
            name, _, rest = path[len(PREFIX) + 1:].partition("/")
            if _encoded_slash(scope):  # /v1/models/churn%2Fpredictions: no model's path (a proxy's rules read it raw)
                response = JSONResponse({"error": "a model's name holds no '/' (%2F in the path); send to "
                                                  f"{PREFIX}/<name>/… (GET {PREFIX} lists them)"}, status_code=404)
                await response(scope, receive, send)
                return
            app = self.apps.get(name)
            if app is None:
                await unknown_model(name, self.fleet, scope)(scope, receive, send)
                return
            inner = dict(scope)
            inner["path"] = "/v1/" + rest
            inner["raw_path"] = inner["path"].encode()
            with about_model(name):
                await app(inner, receive, send)
            return
        if path == "/metrics" or path == PREFIX or path.startswith(PREFIX + "/"):
            await self.front(scope, receive, send)
            return
        apps = list(self.apps.values())
        if len(apps) == 1 and not self.fleet.failed:
            await apps[0](scope, receive, send)  # a single-model deployment: every path as always
            return
        if path == "/v1/alerts":
            await self.front(scope, receive, send)
            return
        if path in ("/openapi.json", "/docs", "/redoc"):
            await self.front(scope, receive, send)  # the document of every model's paths
            return
        if apps and (path in SHARED_PATHS or path.startswith("/runbooks")):
            await apps[0](scope, receive, send)
            return
        if not apps and path == "/livez":  # every model failed to start: the process still lives
            await JSONResponse({"status": "ok"})(scope, receive, send)
            return
        if not apps and path in ("/readyz", "/healthz"):  # every model failed to start: not ready, not healthy
            failed = ", ".join(sorted(self.fleet.failed)) if _trusted(self.fleet, scope) else "see GET /v1/models"
            response = JSONResponse({"status": "unavailable", "error": f"no model is running here (failed: "
                                                                       f"{failed}); fix the configuration and "
                                                                       "reload with SIGHUP"},
                                    status_code=503, headers={"Retry-After": "30"})
            await response(scope, receive, send)
            return
        names = _names(self.fleet, scope)
        response = JSONResponse({"error": f"this daemon hosts several models ({names}): send to "
                                          f"{PREFIX}/<name>{path[3:] if path.startswith('/v1/') else ''} "
                                          f"(GET {PREFIX} lists them)"}, status_code=404)
        await response(scope, receive, send)
