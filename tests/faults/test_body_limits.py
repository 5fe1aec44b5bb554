"""Hostile uploads: the token is checked before any body byte is read, anonymous floods cost no
memory, slow senders are cut off (408), and bodies received at once are capped (503)."""
from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.faults.conftest import TOKEN, fault_config, running_daemon
from tests.monitor.daemon.test_serve import served  # noqa: F401  (fixture)
from tests.support.waiting import wait_until

UPLOAD = 31 * 1024 * 1024
FLOOD = 48


def _headers(port: int, length: int, token: str | None = None) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (f"POST /v1/predictions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"{auth}Content-Length: {length}\r\n\r\n").encode()


def _status(sock: socket.socket, timeout: float) -> int:
    sock.settimeout(timeout)
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError(f"closed after {data!r}")
        data += chunk
    return int(data.split(b" ", 2)[1])


def _complete_upload(port: int) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_headers(port, 2, TOKEN) + b"[]")
        return _status(sock, 5)


def rss_bytes(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for {pid}")


def anonymous_upload(port: int) -> int:
    """Headers of a 31 MiB upload without a token: the answer must come before any body byte is
    sent. Then the body is pushed anyway, as a hostile client would, until the server hangs up."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_headers(port, UPLOAD))
        status = _status(sock, timeout=10)
        chunk = b"[" + b" " * (1024 * 1024 - 1)
        try:
            for _ in range(UPLOAD // len(chunk)):
                sock.sendall(chunk)
        except OSError:
            pass  # the server closed the connection: nothing of the body was wanted
        return status


@pytest.mark.slow
def test_anonymous_upload_flood_is_refused_from_the_headers_and_costs_no_memory(make_config, served):
    cfg = make_config(with_champion=False)
    daemon = served(cfg, token=TOKEN).start("--check-interval", "3600")
    port, pid = daemon.port, daemon.proc.pid
    assert anonymous_upload(port) == 401  # warm: the first request imports the rest of the app
    before = rss_bytes(pid)
    started = time.monotonic()
    with ThreadPoolExecutor(FLOOD) as pool:
        statuses = list(pool.map(anonymous_upload, [port] * FLOOD))
    elapsed = time.monotonic() - started
    peak = rss_bytes(pid, "VmHWM")
    after = rss_bytes(pid)
    growth = max(peak, after) - before
    print(f"\nRSS before {before / 2**20:.0f} MiB, peak {peak / 2**20:.0f} MiB, after {after / 2**20:.0f} MiB, "
          f"growth {growth / 2**20:.1f} MiB for {FLOOD} x {UPLOAD / 2**20:.0f} MiB anonymous uploads "
          f"in {elapsed:.1f} s")
    assert statuses == [401] * FLOOD
    assert growth < 100 * 2**20, f"RSS grew by {growth / 2**20:.0f} MiB"
    assert daemon.proc.poll() is None


def test_slow_sender_gets_408_and_the_inflight_cap_503(tmp_path):
    cfg = fault_config(tmp_path / "home", server={"body_timeout_seconds": 1.5, "max_inflight_bodies": 2})
    with running_daemon(cfg) as (_, url):
        port = cfg.server.port
        held = []
        for _ in range(2):  # two authorised uploads that drip
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(_headers(port, 1000, TOKEN) + b"[")
            held.append(sock)
        # Both uploads hold a body slot: a complete small body is refused too.
        wait_until(lambda: _complete_upload(port) == 503, 10, 0.05, "the dripping uploads never held both slots")
        with socket.create_connection(("127.0.0.1", port), timeout=10) as third:
            third.sendall(_headers(port, 1000, TOKEN) + b"[")
            assert _status(third, 5) == 503  # past server.max_inflight_bodies
        started = time.monotonic()
        assert [_status(s, 10) for s in held] == [408, 408]  # past server.body_timeout_seconds
        assert time.monotonic() - started < 3
        for sock in held:
            sock.close()
        # The slots are free again.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(_headers(port, 2, TOKEN) + b"[]")
            assert _status(sock, 10) == 200


def test_a_wrong_token_is_refused_before_the_body(tmp_path):
    cfg = fault_config(tmp_path / "home")
    with running_daemon(cfg) as (_, url):
        port = cfg.server.port
        for path in ("/v1/predictions", "/v1/labels", "/v1/alerts", "/v1/retrain"):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                head = _headers(port, 10_000_000, "wrong-token-0000").replace(b"/v1/predictions", path.encode())
                sock.sendall(head)
                assert _status(sock, 5) == 401, path
