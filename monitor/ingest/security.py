"""Pieces every write endpoint of the driftloop app shares: the bearer-token check and the body limits.

    app = create_app(cfg, store, registry)                       # installs both
    router = APIRouter(dependencies=[Depends(require_token)])    # any further write routes

:class:`RequestGate` is ASGI middleware that checks the token from the headers before any body
byte is read, then bounds the body's size, the number of bodies received at once and the time one
may take. ``require_token`` (reading the token from ``app.state.driftloop_token``, set by
:func:`install`) keeps a route safe should it be mounted without the gate. With no token
configured every request passes.

Reads: with ``server.protect_reads`` every read but :data:`OPEN_READS` (liveness and readiness,
which then tell kinds only) and the runbooks needs the token too, ``/metrics`` included. Otherwise reads are open,
and :func:`trusted` decides what they may tell: an untrusted caller (a token is configured and the
request does not carry it) is told kinds and counts, never a path, mount point, URL or exception
text (``/readyz``, 503 bodies, ``/v1/status``).
"""
from __future__ import annotations

import hmac
from typing import Callable

import anyio
import orjson
from fastapi import FastAPI, HTTPException, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from monitor.config import ServerConfig
from monitor.ingest import memory

TOKEN_STATE = "driftloop_token"
# Reads that stay open with server.protect_reads: probes carry no token, and an alert's runbook_url
# is opened in a browser, which carries none either (the runbooks are the project's docs, nothing
# of the host).
OPEN_READS = frozenset({"/livez", "/readyz", "/healthz"})
OPEN_READ_PREFIXES = ("/runbooks/",)


def _open_read(path: str) -> bool:
    return path in OPEN_READS or path.startswith(OPEN_READ_PREFIXES)


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


def trusted(request: Request) -> bool:
    """Whether ``request`` may be told about the host (paths, mount points, URLs, exception texts):
    it carries the configured token, or no token is configured (then every caller is trusted)."""
    return token_matches(getattr(request.app.state, TOKEN_STATE, None), request.headers.get("authorization"))


async def require_token(request: Request) -> None:
    """FastAPI dependency for write endpoints: 401 unless the request carries the configured token."""
    authorization = request.headers.get("authorization")
    if not token_matches(getattr(request.app.state, TOKEN_STATE, None), authorization):
        raise HTTPException(status_code=401, detail=unauthorized_message(authorization), headers=UNAUTHORIZED_HEADERS)


class RequestGate:
    """ASGI middleware in front of every request. A read (GET, HEAD, OPTIONS) passes, unless
    ``protect_reads`` and a token are set: then a GET or HEAD outside :data:`OPEN_READS` and the
    runbooks without the token is answered 401. A write (any other method) goes through, in this order:

    1. the bearer token, from the headers alone: a wrong or missing token is answered 401 before
       one byte of the body is read (the connection is then closed, and the unread body is dropped
       by the server as it arrives, so anonymous uploads cost no memory);
    2. ``Content-Length`` over ``max_bytes``: 413 from the header alone;
    3. at most ``max_inflight`` requests with a body in flight at once, from the first body byte
       until the answer (receiving, decompressing, parsing, validating, storing): past that, 503
       with ``Retry-After``. The memory this bounds is in docs/operations/faults.md;
    4. the body must arrive whole within ``body_timeout`` seconds (slow senders are answered 408),
       and its bytes are counted as they come, so leaving ``Content-Length`` out does not get
       around the limit.

    The body is gathered here and replayed to the app, so the limits hold whichever way the route
    reads it. ``on_reject(path, reason)`` is told about each refusal (reasons: ``unauthorized``,
    ``too_large``, ``busy``, ``timeout``). When the last of a burst of large bodies (as received,
    or as inflated: the app marks those with :data:`monitor.ingest.memory.LARGE_BODY_SCOPE`) is
    answered, the freed memory is handed back to the operating system
    (:func:`monitor.ingest.memory.release`).
    """

    def __init__(self, app: ASGIApp, *, token: str | None, max_bytes: int, max_inflight: int,
                 body_timeout: float, on_reject: Callable[[str, str], None] | None = None,
                 protect_reads: bool = False):
        self.app = app
        self.token = token
        self.protect_reads = protect_reads and bool(token)
        self.max_bytes = max_bytes
        self.max_inflight = max_inflight
        self.body_timeout = body_timeout
        self.on_reject = on_reject
        self.inflight = 0  # one event loop: no lock needed
        self._trim_pending = False  # a large body was handled since memory was last given back

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            if (self.protect_reads and scope["method"] != "OPTIONS" and not _open_read(scope.get("path", ""))
                    and not token_matches(self.token, _header(scope, b"authorization"))):
                authorization = _header(scope, b"authorization")
                await self._refuse(scope, send, 401, "unauthorized", unauthorized_message(authorization),
                                   UNAUTHORIZED_HEADERS)
                return
            await self.app(scope, receive, send)
            return
        authorization = _header(scope, b"authorization")
        if not token_matches(self.token, authorization):
            await self._refuse(scope, send, 401, "unauthorized", unauthorized_message(authorization),
                               UNAUTHORIZED_HEADERS)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(scope, send, 413, "too_large", _too_large(f"Content-Length {declared} exceeds the limit",
                                                                         self.max_bytes))
            return
        if self.inflight >= self.max_inflight:
            await self._refuse(scope, send, 503, "busy", f"{self.inflight} requests with a body are being received or "
                               f"processed (server.max_inflight_bodies={self.max_inflight}); retry shortly",
                               {"Retry-After": "1"})
            return
        # The slot is held until the app has answered: decompressing, parsing and validating the
        # body cost more memory than receiving it, and must be bounded by the same budget.
        self.inflight += 1
        body: bytes | None = None
        try:
            body = await self._read(scope, receive, send)
            if body is None:
                return
            replayed = False

            async def replay() -> Message:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()  # afterwards: http.disconnect when the client leaves

            await self.app(scope, replay, send)
        finally:
            self.inflight -= 1
            large = (body is not None and len(body) >= memory.LARGE_BODY_BYTES) or \
                bool(scope.get(memory.LARGE_BODY_SCOPE))
            body = None
            if large or self._trim_pending:
                self._trim_pending = self.inflight > 0
                if not self._trim_pending:  # the last large body of a burst is done: memory back to the OS
                    await anyio.to_thread.run_sync(memory.release)

    async def _read(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """The whole body, or None once a refusal has been sent (or the client left)."""
        chunks, size = [], 0
        with anyio.move_on_after(self.body_timeout) as timer:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None  # the client went away; nothing to answer
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.max_bytes:
                    await self._refuse(scope, send, 413, "too_large",
                                       _too_large(f"the body exceeds the limit after {size} bytes", self.max_bytes))
                    return None
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
        assert timer.cancelled_caught
        await self._refuse(scope, send, 408, "timeout", f"the request body did not arrive within {self.body_timeout:g} "
                                                        "s "
                           f"(server.body_timeout_seconds; {size} bytes received)")
        return None

    async def _refuse(self, scope: Scope, send: Send, status: int, reason: str, message: str,
                      headers: dict[str, str] | None = None) -> None:
        if self.on_reject is not None:
            self.on_reject(scope.get("path", ""), reason)
        payload = orjson.dumps({"error": message})
        # Connection: close, since the rest of the body is not read.
        raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
               (b"connection", b"close"), *((k.lower().encode(), v.encode()) for k, v in (headers or {}).items())]
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": payload})


def _too_large(why: str, limit: int) -> str:
    return f"request body too large: {why} of {limit} bytes (server.max_body_bytes); send smaller batches"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def install(app: FastAPI, server: ServerConfig, on_reject: Callable[[str, str], None] | None = None) -> None:
    """Set the token ``require_token`` checks and put :class:`RequestGate` in front of ``app``."""
    setattr(app.state, TOKEN_STATE, server.token)
    app.add_middleware(RequestGate, token=server.token, max_bytes=server.max_body_bytes,
                       max_inflight=server.max_inflight_bodies, body_timeout=server.body_timeout_seconds,
                       on_reject=on_reject, protect_reads=server.protect_reads)
