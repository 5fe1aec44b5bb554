"""Liveness that load cannot starve (issue 35, item 3): a real ``driftloop serve --health-port``
under the two probes that starved ``/livez`` before, 600 keep-alive clients looping ``/v1/status``
(more than the connection cap, 256 here) and a burst of large bodies.

What is asserted is behaviour, not speed (a loaded CI machine would flake a latency bound; the
figures are bench/bench_health.py's): every probe of the health port is answered 200, every flood
request is answered (200, or 503 + Retry-After over the cap), none is cut, and the health port
stops answering once the daemon is killed. Each probe's time is printed.
"""
from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from monitor.config import load_config
from tests.faults.test_memory_bound import _records_body
from tests.monitor.daemon.conftest import SMALL, merge
from tests.monitor.daemon.test_serve import Served
from tests.support.services import free_port

FLOOD_CLIENTS = 600
FLOOD_SECONDS = 4.0


class Tally:
    def __init__(self) -> None:
        self.answers: dict[int, int] = {}
        self.cut = 0
        self.no_retry_after = 0
        self.errors: list[str] = []


async def _looping_client(host: str, port: int, until: float, tally: Tally) -> None:
    """One keep-alive client: GET /v1/status again and again; after a 503 (the server closes) it
    reconnects. A request sent and not answered with a whole response is a cut."""
    request = f"GET /v1/status HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    while time.monotonic() < until:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        try:
            while True:  # at least one request per connection, however late it was accepted
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                status = int(head.split(b" ", 2)[1])
                length = next((int(line.split(b":", 1)[1]) for line in head.lower().split(b"\r\n")
                               if line.startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                tally.answers[status] = tally.answers.get(status, 0) + 1
                if status == 503:
                    tally.no_retry_after += b"retry-after:" not in head.lower()
                    await asyncio.sleep(0.05)
                    break  # the server closes after a 503
                if time.monotonic() >= until:
                    break
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            tally.cut += 1
            tally.errors.append(repr(exc)[:200])
        finally:
            writer.close()


def _flood(port: int, seconds: float, tally: Tally) -> None:
    async def run() -> None:
        until = time.monotonic() + seconds
        await asyncio.gather(*(_looping_client("127.0.0.1", port, until, tally) for _ in range(FLOOD_CLIENTS)))
    asyncio.run(run())


def _probe(url: str, every: float, stop: threading.Event) -> list[tuple[int, float]]:
    """GET ``url`` on a fresh connection each time (as kubelet does) until ``stop``."""
    out = []
    while not stop.is_set():
        started = time.monotonic()
        try:
            status = httpx.get(url, timeout=10).status_code
        except httpx.HTTPError:
            status = 0
        out.append((status, time.monotonic() - started))
        stop.wait(every)
    return out


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    work = tmp_path_factory.mktemp("liveness")
    # A cap of 256: 600 clients are well over it however slowly this machine accepts them.
    cfg = load_config(path=None, environ={}, overrides=merge(SMALL, {"home": str(work / "home"),
                                                                     "server": {"max_connections": 256}}))
    served = Served(cfg, work)
    served.health_port = free_port()
    served.start("--check-interval", "3600", "--health-port", str(served.health_port))
    yield served
    served.stop()


def _summary(probes: list[tuple[int, float]]) -> str:
    times = sorted(t for _, t in probes)
    return f"{len(probes)} probes, median {times[len(times) // 2] * 1000:.0f} ms, max {times[-1] * 1000:.0f} ms"


def test_health_port_answers_through_a_connection_flood_and_no_request_is_cut(daemon):
    health = f"http://127.0.0.1:{daemon.health_port}/livez"
    assert httpx.get(health, timeout=10).json() == {"status": "ok"}
    assert httpx.get(f"http://127.0.0.1:{daemon.health_port}/readyz", timeout=10).status_code == 404
    tally, stop = Tally(), threading.Event()
    with ThreadPoolExecutor(1) as pool:
        probes = pool.submit(_probe, health, 0.25, stop)
        _flood(daemon.port, FLOOD_SECONDS, tally)
        stop.set()
        answered = probes.result()
    print(f"\n{FLOOD_CLIENTS} keep-alive clients looping /v1/status for {FLOOD_SECONDS:g} s: answers "
          f"{dict(sorted(tally.answers.items()))}, cut {tally.cut}; health port: {_summary(answered)}")
    assert answered and all(status == 200 for status, _ in answered), answered
    assert tally.cut == 0, f"{tally.cut} requests cut without an answer: {sorted(set(tally.errors))[:5]}"
    assert set(tally.answers) == {200, 503}, tally.answers  # served, and refused over the cap
    assert tally.no_retry_after == 0
    assert httpx.get(daemon.url + "/livez", timeout=10).status_code == 200


def test_health_port_answers_through_a_burst_of_large_bodies(daemon):
    health = f"http://127.0.0.1:{daemon.health_port}/livez"
    body = _records_body(2 * 1024 * 1024)  # refused 422 (an unknown field) after a whole parse
    headers = {"Content-Type": "application/json"}
    stop = threading.Event()

    def post(_: int) -> int:
        with httpx.Client(timeout=120) as client:
            while True:  # retry on 503 (the in-flight cap), as a well-behaved client would
                r = client.post(daemon.url + "/v1/predictions", content=body, headers=headers)
                if r.status_code != 503:
                    return r.status_code
                time.sleep(0.1)

    with ThreadPoolExecutor(1) as probing, ThreadPoolExecutor(48) as senders:
        probes = probing.submit(_probe, health, 0.25, stop)
        statuses = list(senders.map(post, range(96)))
        stop.set()
        answered = probes.result()
    print(f"\n96 bodies of {len(body) / 2**20:.1f} MiB, 48 at once: health port {_summary(answered)}")
    assert set(statuses) == {422}, statuses
    assert answered and all(status == 200 for status, _ in answered), answered


def test_the_health_port_stops_answering_when_the_daemon_dies(daemon):
    # Last in the module: it kills the daemon.
    daemon.proc.kill()
    daemon.proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{daemon.health_port}/livez", timeout=1)
        except httpx.HTTPError:
            return
        time.sleep(0.1)
    pytest.fail("the health port still answers 10 s after the daemon was killed")
