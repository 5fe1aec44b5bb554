"""The liveness listener of monitor/ingest/liveness.py: what it answers to a request head, and the
child process on a real socket: 200 while beats come, 503 once they stop for longer than the stall
limit, gone when the daemon's end of the pipe closes, and started again by ``check`` if it dies."""
from __future__ import annotations

import socket
import time

import httpx
import pytest

from monitor.ingest.liveness import LivenessListener, answer


@pytest.mark.parametrize(("head", "stalled", "status"), [
    (b"GET /livez HTTP/1.1\r\nHost: x", False, b"200"),
    (b"GET /livez?verbose HTTP/1.1\r\nHost: x", False, b"200"),
    (b"GET /livez HTTP/1.1\r\nHost: x", True, b"503"),
    (b"HEAD /livez HTTP/1.0", False, b"200"),
    (b"GET /readyz HTTP/1.1\r\nHost: x", False, b"404"),
    (b"POST /livez HTTP/1.1\r\nHost: x", False, b"404"),
    (b"\x16\x03\x01 tls hello", False, b"400"),
    (b"", False, b"400"),
])
def test_answer(head, stalled, status):
    reply = answer(head, stalled)
    assert reply.split(b" ", 2)[1] == status
    assert b"connection: close" in reply
    if head.startswith(b"HEAD"):
        assert reply.endswith(b"\r\n\r\n")


def _bound() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


def _status(port: int) -> int:
    return httpx.get(f"http://127.0.0.1:{port}/livez", timeout=10).status_code


def _until(condition, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def listener():
    sock = _bound()
    made = LivenessListener(sock, stall_seconds=0.5)
    made.start()
    yield made, sock.getsockname()[1]
    made.stop()
    sock.close()


def test_the_child_answers_while_beaten_and_503_when_beats_stop(listener):
    live, port = listener
    assert _status(port) == 200  # fresh: counted from its start
    assert _until(lambda: _status(port) == 503), "no 503 after the beats stopped"
    live.beat()
    assert _status(port) == 200
    assert httpx.get(f"http://127.0.0.1:{port}/v1/status", timeout=10).status_code == 404


def test_a_slow_or_silent_client_does_not_hold_the_others(listener):
    _, port = listener
    silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(100)]  # past MAX_CONNECTIONS
    try:
        slow = socket.create_connection(("127.0.0.1", port))
        slow.sendall(b"GET /liv")
        live, _ = listener
        live.beat()
        assert _status(port) == 200
        slow.close()
    finally:
        for sock in silent:
            sock.close()


def test_the_child_exits_with_the_daemon_and_check_starts_it_again(listener):
    live, port = listener
    first = live._proc
    assert first is not None
    first.kill()
    first.wait(10)
    live.check()
    assert live.pid is not None and live.pid != first.pid
    live.beat()
    assert _status(port) == 200
    child = live._proc
    live._close_pipe()  # as when the daemon dies: EOF on the beats
    assert child is not None and child.wait(10) == 0
