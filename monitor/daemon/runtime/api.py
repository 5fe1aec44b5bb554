"""The daemon's HTTP endpoints, mounted on the ingestion app: ``POST /v1/alerts`` (Alertmanager
webhook), ``POST /v1/retrain`` (manual trigger) and ``GET /v1/status``.

Writes take the same bearer token as ingestion (``server.token``). Errors use ingestion's shape,
``{"error": ..., "errors": [{"field", "message"}]}``: 400 for a body that is not JSON, 422 for
one that does not match (each wrong field named), 409 for a retrain asked for while one runs
(202 with ``retrain: waiting`` when it is queued for one of the deployment's retrain slots).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, TypeVar

import anyio
import orjson
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from monitor.daemon.decisions.actions import StartKind
from monitor.daemon.decisions.kinds import State
from monitor.daemon.retraining.champion import NoChampionError
from monitor.daemon.runtime.alertmanager import WebhookPayload
from monitor.daemon.state.attempts import BusyError
from monitor.errors import Outage, RequestError, UnavailableError
from monitor.daemon.runtime.views import public_status
from monitor.ingest import openapi
from monitor.ingest.security import trusted
from monitor.store.engine import request_wait

if TYPE_CHECKING:
    from monitor.daemon.runtime.daemon import Daemon

M = TypeVar("M", bound=BaseModel)


class RetrainRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    reason: str = Field("requested through POST /v1/retrain", max_length=1000,
                        description="why; recorded on the incident")


class BadRequest(RequestError):
    pass


def parse_body(raw: bytes, model: type[M], what: str, *, empty_ok: bool = False) -> M:
    if not raw.strip() and empty_ok:
        return model()
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(400, f"the body is not valid JSON: {exc}") from exc
    try:
        # JSON mode: with strict models, times are RFC 3339 text, as the OpenAPI schema says.
        return model.model_validate_json(raw)
    except PydanticValidationError as exc:
        errors = [{"field": ".".join(str(p) for p in e["loc"]) or "(body)", "message": e["msg"]} for e in exc.errors()]
        raise BadRequest(422, f"not a valid {what}: {len(errors)} problem(s), first: "
                              f"{errors[0]['field']}: {errors[0]['message']}", errors) from exc


_UNAVAILABLE = "The store or MLflow is unavailable; retry after Retry-After seconds"
_WRITE_ERRORS = {400: "The body is not JSON", 401: "Missing or wrong bearer token",
                 413: "Body too large", 422: "The body does not match (each wrong field named)",
                 503: _UNAVAILABLE}


def _error(exc: BadRequest) -> JSONResponse:
    body: dict[str, Any] = {"error": str(exc)}
    if exc.errors is not None:
        body["errors"] = exc.errors
    return JSONResponse(body, status_code=exc.status)


def build_router(daemon: "Daemon", require_token: Callable[..., Any]) -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["daemon"])

    async def run(fn: Callable[..., Any], *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args)

    def controlled(fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` (which takes the controller's lock) with that lock taken first for at most the
        request's store wait: a check holding it while it waits on a locked store (up to the busy
        timeout) makes a retrain, an alert or a reset a 503 + Retry-After, not a request held 30 s."""
        def call(*args: Any) -> Any:
            lock, wait = daemon.controller.lock, request_wait()
            if not lock.acquire(timeout=-1 if wait is None else wait):
                raise UnavailableError(f"the daemon is busy: a check or a retrain's bookkeeping holds its controller "
                                       f"(e.g. waiting on the store) beyond {wait:g} s; retry later", kind=Outage.BUSY)
            try:
                return fn(*args)  # re-takes the (re-entrant) lock at once
            finally:
                lock.release()
        return call

    @router.post("/alerts", dependencies=[Depends(require_token)], summary="Alertmanager webhook (version 4)",
                 openapi_extra=openapi.model_body(WebhookPayload, required=True),
                 responses=openapi.error_responses(_WRITE_ERRORS))
    async def alerts(request: Request) -> Any:
        """Firing alerts labelled for this model (``alerts.webhook_match``, default
        ``component="model"``) open an incident or attach to the open one, and retrain unless the
        cooldown or a running retrain says wait; resolved ones are recorded, and resolve an
        incident Alertmanager opened. On a follower (several daemons on one PostgreSQL store) they
        are held in the store for the model's leader, which acts within seconds (``kind: queued``)."""
        try:
            payload = parse_body(await request.body(), WebhookPayload, "Alertmanager webhook payload (version 4)")
        except BadRequest as exc:
            return _error(exc)
        return (await run(controlled(daemon.handle_alerts), payload)).to_dict()

    @router.post("/retrain", status_code=202, dependencies=[Depends(require_token)],
                 summary="Start a retrain now (no cooldown; one at a time)",
                 openapi_extra=openapi.model_body(RetrainRequest, {"reason": "new labels from the quarterly audit"}),
                 responses=openapi.error_responses({**_WRITE_ERRORS, 409: "a retrain is already running, there "
                                                    "is too little labelled data to start one, or there is no "
                                                    "champion yet"}))
    async def retrain(request: Request) -> Any:
        try:
            body = parse_body(await request.body(), RetrainRequest, "retrain request", empty_ok=True)
        except BadRequest as exc:
            return _error(exc)
        try:
            result = await run(controlled(daemon.retrain_now), "manual", body.reason)
        except BusyError as exc:
            return _error(BadRequest(409, str(exc)))
        except NoChampionError as exc:
            return _error(BadRequest(409, f"no champion: {exc}"))
        queued = result.action.retrain is StartKind.WAITING  # waits for a retrain slot of the deployment
        if result.details.get("attempt_id") is None and not queued:  # e.g. too few labelled rows to train on
            incident = result.incident
            # The request is on record as an incident, resolved at once: nothing waits or resumes.
            closed = (f" (nothing waits: incident {incident.id}, which records this request, is resolved; ask "
                      "again once that is met)" if incident is not None and incident.state == State.RESOLVED else "")
            why = result.action.detail or result.action.describe()
            return JSONResponse({"error": f"retrain not started: {why}{closed}", **result.to_dict()},
                                status_code=409)
        return JSONResponse(result.to_dict(), status_code=202)

    @router.post("/reference/reset", dependencies=[Depends(require_token)],
                 summary="Accept the champion's baseline as the reference level of good performance",
                 responses=openapi.error_responses({401: "Missing or wrong bearer token",
                                                    409: "there is no champion yet",
                                                    503: _UNAVAILABLE}))
    async def reference_reset() -> Any:
        """Recovery is judged against the higher of the champion's baseline and the reference level
        (what good looked like before the drift). When the concept really became harder, so that no
        model reaches the old level, accept the champion's baseline as the new level; the open
        incident can then resolve. Recorded on the open incident."""
        try:
            return await run(controlled(daemon.reset_reference))
        except NoChampionError as exc:
            return _error(BadRequest(409, f"no champion: {exc}"))

    @router.get("/status", summary="Champion, last check, open incidents, recent retrains",
                responses=openapi.error_responses({401: "Missing or wrong bearer token (server.protect_reads)",
                                                   422: "limit out of range", 503: _UNAVAILABLE}))
    async def status(request: Request, limit: int = Query(5, ge=1, le=100,
                                                          description="recent incidents and retrains")
                     ) -> dict[str, Any]:
        """The whole status for a caller with the bearer token (or when none is configured).
        Without it, the same structure with states, counts, versions and figures, but every error
        text, incident detail, check message, path and URI replaced by `"hidden"` (`hidden` counts
        them); with `server.protect_reads`, 401."""
        body = await run(lambda: daemon.status(limit=limit))
        return body if trusted(request) else public_status(body)

    return router
