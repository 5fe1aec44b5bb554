"""Pieces every write endpoint of the driftloop app shares: the bearer-token check and the body-size limit.

    app = create_app(cfg, store, registry)                       # installs both
    router = APIRouter(dependencies=[Depends(require_token)])    # any further write routes

``require_token`` reads the expected token from ``app.state.driftloop_token`` (set by
:func:`install`); with no token configured every request passes. :class:`BodySizeLimit` is ASGI
middleware: it answers 413 from the ``Content-Length`` header alone when that is too big, and also
counts the bytes of a body that arrives in chunks, so a client cannot get around the limit by
leaving the header out.
"""
from __future__ import annotations

import hmac
from typing import Callable

import orjson
from fastapi import FastAPI, HTTPException, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKEN_STATE = "driftloop_token"


def token_matches(expected: str | None, authorization: str | None) -> bool:
    """True when no token is configured, or ``authorization`` is ``Bearer <expected>``."""
    if not expected:
        return True
    if not authorization:
        return False
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return False
    # compare_digest takes time independent of where the strings differ.
    return hmac.compare_digest(credentials.strip().encode(), expected.encode())


def unauthorized_message(authorization: str | None) -> str:
    if not authorization:
        return "this endpoint needs 'Authorization: Bearer <token>' (server.token is set)"
    return "the bearer token is not valid for this server"


UNAUTHORIZED_HEADERS = {"WWW-Authenticate": 'Bearer realm="driftloop"'}


async def require_token(request: Request) -> None:
    """FastAPI dependency for write endpoints: 401 unless the request carries the configured token."""
    authorization = request.headers.get("authorization")
    if not token_matches(getattr(request.app.state, TOKEN_STATE, None), authorization):
        raise HTTPException(status_code=401, detail=unauthorized_message(authorization), headers=UNAUTHORIZED_HEADERS)


class BodyTooLarge(Exception):
    pass


class BodySizeLimit:
    """ASGI middleware: request bodies over ``max_bytes`` get 413 before any route sees them.

    The body is gathered here (the routes read it whole anyway) and replayed to the app, so the
    limit holds whichever way the route reads it. ``on_reject(path)`` is told about each 413.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, on_reject: Callable[[str], None] | None = None):
        self.app = app
        self.max_bytes = max_bytes
        self.on_reject = on_reject

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS", "DELETE"):
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._reject(scope, send, f"Content-Length {declared} exceeds the limit")
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client went away; nothing to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._reject(scope, send, f"the body exceeds the limit after {size} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # afterwards: http.disconnect when the client leaves

        await self.app(scope, replay, send)

    async def _reject(self, scope: Scope, send: Send, why: str) -> None:
        if self.on_reject is not None:
            self.on_reject(scope.get("path", ""))
        payload = orjson.dumps({"error": f"request body too large: {why} of {self.max_bytes} bytes "
                                         "(server.max_body_bytes); send smaller batches"})
        # Connection: close, since the rest of the oversized body is not read.
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": payload})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def install(app: FastAPI, token: str | None, max_body_bytes: int,
            on_too_large: Callable[[str], None] | None = None) -> None:
    """Set the token ``require_token`` checks and add the body-size limit to ``app``."""
    setattr(app.state, TOKEN_STATE, token)
    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes, on_reject=on_too_large)
