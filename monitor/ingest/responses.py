"""One error shape for every endpoint (ingestion's and the daemon's routers): ``{"error", "errors"}``
with a 4xx for what the client can fix, 503 + ``Retry-After`` for a dependency that is down (the store,
MLflow: the request may succeed when re-sent, ids make writes idempotent), and never a traceback.

A 503 also carries ``kind`` (an :class:`~monitor.errors.Outage`). Its ``error`` names paths, URLs
and exception texts only for a trusted caller (:func:`monitor.ingest.security.trusted`: the bearer
token, or no token configured); anyone else reads a sentence made of the kind alone."""
from __future__ import annotations

import logging
from typing import Any

import sqlalchemy as sa
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from monitor.errors import DriftloopError, Outage, RegistryError, StoreError, UnavailableError
from monitor.ingest.security import trusted

log = logging.getLogger("monitor.ingest.app")


def error_response(status: int, message: str, errors: list[dict] | None = None,
           headers: dict[str, str] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"error": message}
    if errors is not None:
        body["errors"] = errors
    return JSONResponse(body, status_code=status, headers=headers)


RETRY_AFTER_SECONDS = 1
# A full or read-only disk is not freed in a second; clients retry less eagerly.
FULL_RETRY_AFTER_SECONDS = 30
# What a dependency that is down (the store, MLflow) raises; answered 503 + Retry-After on every
# endpoint, since the request may succeed when re-sent (ids make writes idempotent).
DEPENDENCY_ERRORS: tuple[type[Exception], ...] = (
    StoreError, RegistryError, UnavailableError, sa.exc.OperationalError, sa.exc.InterfaceError, sa.exc.TimeoutError,
    sa.exc.DisconnectionError)


def unavailable(message: str, kind: Outage = Outage.UNREACHABLE,
                retry_after: int = RETRY_AFTER_SECONDS) -> JSONResponse:
    return JSONResponse({"error": message, "kind": kind.value}, status_code=503,
                        headers={"Retry-After": str(retry_after)})


def outage_kind(exc: BaseException) -> Outage:
    """What kind of outage ``exc`` (one of :data:`DEPENDENCY_ERRORS`) stands for."""
    if isinstance(exc, DriftloopError) and exc.kind is not None:
        return exc.kind
    orig = getattr(exc, "orig", None)
    # SQLite names a lock by its text alone (as monitor.store.engine reads it).
    if orig is not None and any(word in str(orig).lower() for word in ("locked", "busy")):
        return Outage.LOCKED
    return Outage.UNREACHABLE


def public_message(what: str, kind: Outage) -> str:
    """The sentence an untrusted caller reads for ``what`` (e.g. "the store") being down: no path,
    URL or exception text."""
    return f"{what} is unavailable ({kind.value}); retry later"


def dependency_down(request: Request, exc: BaseException) -> JSONResponse:
    """The 503 for ``exc``: the full :func:`dependency_message` for a trusted caller (and the log),
    the kind alone for anyone else."""
    kind = outage_kind(exc)
    if trusted(request):
        return unavailable(dependency_message(exc), kind)
    what = "the MLflow registry" if isinstance(exc, RegistryError) else \
        "a dependency" if isinstance(exc, UnavailableError) else "the store"
    return unavailable(public_message(what, kind), kind)


def dependency_message(exc: BaseException) -> str:
    """One line naming what is down, without a traceback or SQL."""
    if isinstance(exc, UnavailableError):
        return str(exc)
    if isinstance(exc, (StoreError, RegistryError)):
        return f"{'the store' if isinstance(exc, StoreError) else 'the MLflow registry'} is unavailable; " \
               f"retry later ({exc})"
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip().splitlines()
    return f"the store is unavailable; retry later ({text[0] if text else type(exc).__name__})"


def install_error_handlers(app: FastAPI) -> None:
    """One error shape for every endpoint (the daemon's routers too): ``{"error", "errors"}``;
    dependency failures are 503 + Retry-After, and nothing answers with a traceback."""

    @app.exception_handler(StarletteHTTPException)
    async def httperror_response(request: Request, exc: StarletteHTTPException) -> Response:
        return error_response(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def request_invalid(request: Request, exc: RequestValidationError) -> Response:
        errors = [{"field": ".".join(str(p) for p in e["loc"][1:]) or str(e["loc"][0]), "message": e["msg"]}
                  for e in exc.errors()]
        said = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        return error_response(422, f"invalid request: {said}", errors)

    async def down(request: Request, exc: Exception) -> Response:
        log.warning("%s %s: %s", request.method, request.url.path, dependency_message(exc))
        return dependency_down(request, exc)

    for error in DEPENDENCY_ERRORS:
        app.add_exception_handler(error, down)

    async def bug(request: Request, exc: Exception) -> Response:
        # Starlette logs the traceback; the client gets the error shape, not the trace.
        return error_response(500, "internal error; the server log has the details")

    app.add_exception_handler(Exception, bug)
