"""The connection limits of monitor/ingest/server.py on a real uvicorn server, for both of uvicorn's
HTTP/1.1 protocols: a request head too slow is cut with 408, an idle connection gives its place to a
new one at the cap, the cap answers 503 when no connection can give its place (and the client reads
that 503 rather than a reset), and neither keep-alive nor pipelined requests are cut while they are
served."""
from __future__ import annotations

import asyncio
import select
import socket
import threading
import time
from typing import Iterator

import pytest
import uvicorn

from monitor.ingest import server as server_module
from monitor.ingest.server import HTTPTOOLS, ConnectionLimits, protocol_class
from tests.support.services import free_port

IMPLEMENTATIONS = ["h11", pytest.param("httptools", marks=pytest.mark.skipif(not HTTPTOOLS, reason="no httptools"))]


class App:
    """``/`` answers at once; ``/hang`` waits until ``release`` is set."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/hang":
            await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture(params=IMPLEMENTATIONS)
def server(request) -> Iterator[tuple[int, App, uvicorn.Server]]:
    app = App()
    port = free_port()
    limits = ConnectionLimits(header_timeout=0.6, idle_timeout=0.4, max_connections=8)
    srv = uvicorn.Server(uvicorn.Config(app, port=port, http=protocol_class(limits, request.param),
                                        log_config=None, timeout_keep_alive=limits.idle_timeout))  # type: ignore[arg-type]
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.01)
    yield port, app, srv
    srv.should_exit = True
    thread.join(5)


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _read(sock: socket.socket, timeout: float = 3.0) -> bytes | None:
    """What arrives before ``timeout`` (b"" for a close), None when nothing does."""
    ready, _, _ = select.select([sock], [], [], timeout)
    if not ready:
        return None
    try:
        return sock.recv(65536)
    except ConnectionResetError:
        return b""


def _get(sock: socket.socket, path: str = "/") -> bytes:
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    data = b""
    while not data.endswith(b"ok"):
        chunk = _read(sock)
        assert chunk, data
        data += chunk
    return data


def test_a_slow_head_gets_408_at_the_header_timeout(server):
    port, _, _ = server
    with _connect(port) as sock:
        started = time.monotonic()
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: a")
        answer = _read(sock)
        took = time.monotonic() - started
    assert answer is not None and answer.startswith(b"HTTP/1.1 408"), answer
    assert 0.5 <= took < 2.5, took  # header timeout 0.6 s; a miss answers nothing within _read's 3 s


def test_keep_alive_requests_are_served_and_a_quiet_connection_is_closed(server):
    port, _, _ = server
    with _connect(port) as sock:
        for _ in range(3):  # each within the idle timeout of the last
            assert _get(sock).startswith(b"HTTP/1.1 200")
            time.sleep(0.2)
        started = time.monotonic()
        assert _read(sock) == b""  # closed by the idle timeout
        assert time.monotonic() - started < 2.5  # idle timeout 0.4 s; a miss answers nothing within _read's 3 s
    with _connect(port) as sock:  # two pipelined requests: both answered, neither cut
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while data.count(b"HTTP/1.1 200") < 2:
            chunk = _read(sock)
            assert chunk, data
            data += chunk


def test_at_the_cap_the_oldest_idle_connection_makes_room(server, monkeypatch):
    port, app, srv = server
    monkeypatch.setattr(server_module, "EVICT_AFTER_SECONDS", 0.2)  # under this fixture's 0.6 s header timeout
    idle = [_connect(port) for _ in range(8)]  # the cap
    time.sleep(0.3)  # past EVICT_AFTER_SECONDS: these may now be closed to make room
    idle += [_connect(port) for _ in range(4)]
    time.sleep(0.05)
    with _connect(port) as sock:
        assert _get(sock).startswith(b"HTTP/1.1 200")
    closed = [s for s in idle if _read(s, 0) is not None]
    assert len(closed) >= 5  # 13 connections at a cap of 8
    assert all(_read(s, 0) == b"" for s in closed)  # closed, not answered: none had sent a request
    assert all(_read(s, 0) is None for s in idle[-3:])  # the newest stay
    for s in idle:
        s.close()
    # Every connection busy with a request: one more is answered 503 and closed.
    busy = [_connect(port) for _ in range(8)]
    for s in busy:
        s.sendall(b"GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.3)
    with _connect(port) as sock:
        answer = _read(sock)
        assert answer is not None and answer.startswith(b"HTTP/1.1 503"), answer
        assert b"retry-after" in answer.lower()
    _loop_of(srv).call_soon_threadsafe(app.release.set)
    for s in busy:
        assert (_read(s) or b"").startswith(b"HTTP/1.1 200")
        s.close()


def test_over_the_cap_a_request_gets_503_never_a_cut(server, monkeypatch):
    """Connections that have just connected are not closed to make room (their request may be on
    its way): one over the cap is answered 503, and a request the client sends after that 503 (a
    body too) is read and dropped, so the client reads its 503 instead of a reset."""
    port, _, _ = server
    monkeypatch.setattr(server_module, "EVICT_AFTER_SECONDS", 60.0)  # "just connected", however loaded the machine
    fresh = [_connect(port) for _ in range(8)]  # the cap
    over = [_connect(port) for _ in range(6)]
    try:
        for sock in over:
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\ncontent-length: 65536\r\n\r\n" + b"x" * 65536)
        for sock in over:
            answer = b""
            while b"\r\n\r\n" not in answer:
                chunk = _read(sock)
                assert chunk, f"cut without an answer: {answer!r}"
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 503") and b"retry-after" in answer.lower(), answer
        for sock in fresh:  # the 8 in the cap were left alone and are served
            assert _get(sock).startswith(b"HTTP/1.1 200")
    finally:
        for sock in fresh + over:
            sock.close()


def _loop_of(srv: uvicorn.Server) -> asyncio.AbstractEventLoop:
    protocol = next(iter(srv.server_state.connections))
    return protocol.loop  # type: ignore[attr-defined]
