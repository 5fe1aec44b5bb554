"""What the HTTP server needs so that connections cannot hold the daemon: a header timeout, an idle
timeout and a connection cap (uvicorn alone has only the idle one), and a bounded store wait for
every request.

uvicorn's HTTP/1.1 protocols start the request's ASGI task only once the request head is parsed, and
until then nothing times a connection out: a client sending its headers at one byte a second was
held for 150 s, and 1,100 idle connections exhausted an open-file limit of 1,024 so that ``/livez``
failed. :func:`protocol_class` returns a subclass of uvicorn's httptools protocol (or of its h11 one
where httptools is not installed; both get the same limits and the same tests) that

- closes a connection whose request head is not whole ``header_timeout`` seconds after it connected
  (or after ``idle_timeout + header_timeout`` following its previous response), answering 408 when
  part of a head came;
- at ``max_connections``, makes room for a new connection by closing the oldest one that has waited
  at least :data:`EVICT_AFTER_SECONDS` for a request head (since it connected or since its last
  response) with none of it received (idle or slow:
  they hold nothing but a socket), so a flood of idle sockets cannot lock out a liveness probe;
- otherwise answers the new connection 503 + ``Retry-After`` at once and half-closes it, reading
  and dropping what the client still sends until it closes (at most the header timeout), so the
  client's request gets that 503, never a connection cut under it. A connection is never closed
  to make room while its next request head is on the wire (unread bytes are peeked first), nor
  within that time of its connect or its last response: a keep-alive client looping requests is
  not cut between two of them. Answered 503s held open are bounded by
  :data:`MAX_REFUSING` (beyond it a refusal is written and closed at once, as before).

The keep-alive idle timeout is uvicorn's ``timeout_keep_alive``. The hooks used are uvicorn's
protocol internals (``handle_events``, ``on_headers_complete``, ``on_response_complete``, ``cycle``,
``pipeline``), not a public API: ``tests/monitor/ingest/test_server.py`` runs every case on the
installed uvicorn, so an upgrade that moves them fails there first. The body is bounded elsewhere
(``security.py``: ``server.body_timeout_seconds``).
"""
from __future__ import annotations

import asyncio
import logging
import resource
import socket
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, ClassVar

from uvicorn.protocols.http.h11_impl import H11Protocol

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    HTTPTOOLS = True
except ImportError:  # httptools is optional (uvicorn[standard])
    HttpToolsProtocol = H11Protocol  # type: ignore[misc,assignment]
    HTTPTOOLS = False

from monitor.store.engine import bounded_wait

log = logging.getLogger(__name__)

_TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_FULL_BODY = b'{"error": "too many connections with a request in progress (server.max_connections); retry"}'
_FULL = (b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-type: application/json\r\n"
         b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_FULL_BODY), _FULL_BODY))
# File descriptors kept free for the store, MLflow, reports and logs beside the connections.
FD_HEADROOM = 256
# A connection waiting for a request head is closed to make room only once it has been quiet this
# long since it connected or since its last response. A client sends its head at once, but one of
# 600 clients starting together on a loaded machine took over 0.1 s (that grace cut 88 of them),
# and browsers preconnect; a newcomer meanwhile gets a 503, which is an answer, not a cut.
EVICT_AFTER_SECONDS = 1.0
# Connections answered 503 at the cap and held open until their client closes (inside FD_HEADROOM).
MAX_REFUSING = FD_HEADROOM // 2
# Waiting connections looked at (oldest first) for one to close at the cap.
EVICT_CANDIDATES = 8
LOG_EVERY_SECONDS = 60.0


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout: float
    idle_timeout: float
    max_connections: int


class _Tally:
    """Connections cut, logged at most once a minute: under a flood, one line, not one per socket."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.logged: float | None = None  # the first cut is logged at once

    def add(self, what: str, limits: ConnectionLimits) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1
        now = time.monotonic()
        if self.logged is None or now - self.logged >= LOG_EVERY_SECONDS:
            log.warning("connections closed by the server's limits (header timeout %g s, max %d connections): %s",
                        limits.header_timeout, limits.max_connections,
                        ", ".join(f"{n} {k}" for k, n in sorted(self.counts.items())))
            self.counts.clear()
            self.logged = now


class _Guard(asyncio.Protocol):
    """The limits, mixed into either of uvicorn's HTTP/1.1 protocols (see the module docstring).
    The class attributes are per server: :func:`protocol_class` makes a subclass for each."""

    limits: ClassVar[ConnectionLimits]
    live: ClassVar[set["_Guard"]]
    waiting: ClassVar["OrderedDict[_Guard, float]"]  # waiting for a request head since (loop time), oldest first
    refusing: ClassVar[set["_Guard"]]  # answered 503 at the cap, draining until the client closes
    tally: ClassVar[_Tally]
    # uvicorn's, set by its protocols
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop

    _head_timer: asyncio.TimerHandle | None = None
    _partial = False
    _refused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        cls = type(self)
        if len(cls.live) >= cls.limits.max_connections:
            room = cls._idle_to_close(self.loop.time())
            if room is None:
                self._refuse()
                return
            cls.tally.add("idle closed to make room", cls.limits)
            room._close()
        cls.live.add(self)
        self._await_head(cls.limits.header_timeout)

    @classmethod
    def _idle_to_close(cls, now: float) -> "_Guard | None":
        """The oldest connection waiting for a head long enough, with no byte of it received."""
        for looked, (guard, since) in enumerate(cls.waiting.items()):
            if looked >= EVICT_CANDIDATES or now - since < EVICT_AFTER_SECONDS:
                return None  # oldest first: the rest waited less
            if not guard._partial and not guard._unread():
                return guard
        return None

    def _unread(self) -> bool:
        """Whether bytes have arrived that the loop has not read yet (a head on its way in)."""
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return False
        try:
            with socket.fromfd(sock.fileno(), sock.family, sock.type) as peek:
                return bool(peek.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:  # reset: nothing to protect
            return False

    def _refuse(self) -> None:
        """503 at once, then drain: the client's request, sent after, is read and dropped, so
        closing does not reset the connection before the client has read its answer."""
        cls = type(self)
        cls.tally.add("refused at the cap (all busy)", cls.limits)
        self._refused = True
        self.transport.write(_FULL)
        if len(cls.refusing) >= MAX_REFUSING or not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()
        cls.refusing.add(self)
        self._head_timer = self.loop.call_later(cls.limits.header_timeout, self.transport.close)

    def connection_lost(self, exc: Exception | None) -> None:
        self._forget()
        if self._refused:
            type(self).refusing.discard(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # answered already; dropped until the client closes
        if self._head_timer is not None:
            self._partial = True
        super().data_received(data)

    def _await_next_head(self) -> None:
        """After a response: the next head is due within the idle plus the header timeout."""
        if not self.transport.is_closing():
            self._await_head(self.limits.idle_timeout + self.limits.header_timeout)

    def _await_head(self, seconds: float) -> None:
        self._stop_waiting()
        self._partial = False
        self._head_timer = self.loop.call_later(seconds, self._head_timed_out)
        self.waiting[self] = self.loop.time()

    def _stop_waiting(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        self.waiting.pop(self, None)

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._partial:
            self.tally.add("header timeout", self.limits)
            self.transport.write(_TIMED_OUT)
        self._close()

    def _forget(self) -> None:
        self._stop_waiting()
        self.live.discard(self)

    def _close(self) -> None:
        self._forget()
        if not self.transport.is_closing():
            self.transport.close()


class GuardedH11Protocol(_Guard, H11Protocol):
    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not before:  # a request head was parsed
            self._stop_waiting()

    def on_response_complete(self) -> None:
        self._await_next_head()  # first: a pipelined request handled inside super() disarms it again
        super().on_response_complete()


class GuardedHttpToolsProtocol(_Guard, HttpToolsProtocol):
    def on_headers_complete(self) -> None:
        self._stop_waiting()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        if not self.pipeline:  # a pipelined request already has its head and starts inside super()
            self._await_next_head()
        super().on_response_complete()


def protocol_class(limits: ConnectionLimits, implementation: str = "auto") -> type[_Guard]:
    """A protocol class for one server (pass as ``uvicorn.Config(http=...)``), with its own count of
    connections: uvicorn's httptools protocol when httptools is installed (its parser is in C:
    ~2 ms less per 500 KB body than h11's), else its h11 one, both with the same limits."""
    if implementation == "auto":
        implementation = "httptools" if HTTPTOOLS else "h11"
    base = {"h11": GuardedH11Protocol, "httptools": GuardedHttpToolsProtocol}[implementation]
    attrs: dict[str, Any] = {"limits": limits, "live": set(), "waiting": OrderedDict(), "refusing": set(),
                             "tally": _Tally()}
    return type(f"Server{base.__name__}", (base,), attrs)


def raise_open_file_limit(max_connections: int) -> int:
    """Raise this process's soft open-file limit to its hard limit (a server process should be able to
    use what it is allowed), warn when ``max_connections`` does not leave :data:`FD_HEADROOM` below
    it, and return the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, target, exc)
    if soft != resource.RLIM_INFINITY and max_connections + FD_HEADROOM > soft:
        log.warning("server.max_connections=%d leaves fewer than %d of the open-file limit (%d) for the store, "
                    "MLflow and logs: lower it, or raise the limit (ulimit -n, LimitNOFILE=)",
                    max_connections, FD_HEADROOM, soft)
    return int(soft)


class BoundedStoreWait:
    """ASGI middleware: every HTTP request's store calls wait at most ``seconds`` for a lock (see
    :func:`monitor.store.engine.bounded_wait`), so a locked store is a prompt 503 + Retry-After
    instead of a request held for the busy timeout. Worker threads started through anyio inherit it."""

    def __init__(self, app: Any, seconds: float):
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with bounded_wait(self.seconds):
            await self.app(scope, receive, send)
