"""Benchmark: health and refusals under load, against a real ``driftloop serve`` (issue 35, items 3 and 6).

    .venv/bin/python bench/bench_health.py                      # both parts (about 2 minutes)
    .venv/bin/python bench/bench_health.py --only liveness --body-mib 8
    .venv/bin/python bench/bench_health.py --only locked --burners 16

1. Liveness (``--only liveness``): ``GET /livez`` on a fresh connection every 0.1 s, on the main port
   and on ``server.health_port`` side by side, (a) idle (the baseline), (b) while 600 keep-alive clients
   loop ``GET /v1/status`` (more than the 512-connection cap), (c) while 96 bodies of ``--body-mib``
   MiB arrive, 48 at once, retrying on 503 (refused 422 after a whole parse, as
   tests/faults/test_memory_bound.py sends them). For the flood, the clients' answers are counted
   (200, 503, cut without an answer).
2. Locked store (``--only locked``): the SQLite write lock held by another connection (``BEGIN
   EXCLUSIVE``), default 30 s busy timeout; ``/readyz``, ``POST /v1/predictions``, ``POST
   /v1/labels``, ``GET /v1/status`` timed one after another, first on a quiet machine, then with
   ``--burners`` processes spinning on the CPU (load average ≈ burners + what else runs), then also
   with ``--clients`` clients posting 1,000-record batches in a loop (each refused 503). Baseline:
   ``GET /livez`` in the same conditions.

Prints medians, p99 and max (ms), the load average, and the ratios to the baseline.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

TOKEN = "bench-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def summary(samples: list[float]) -> str:
    if not samples:
        return "no samples"
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return (f"n={len(ordered):4d}  median {statistics.median(ordered) * 1000:8.1f} ms  p99 {p99 * 1000:8.1f} ms  "
            f"max {ordered[-1] * 1000:8.1f} ms")


def load() -> str:
    return "load average %.1f %.1f %.1f" % os.getloadavg()


@contextmanager
def serve(work: Path, **server: object) -> Iterator[tuple[str, int]]:
    """``driftloop serve`` with a token and a health port; yields (main URL, health port)."""
    import yaml

    from monitor.config import load_config
    from tests.monitor.daemon.conftest import SMALL, merge
    from tests.support.services import free_port, wait_answering

    port, health = free_port(), free_port()
    cfg = load_config(path=None, environ={}, overrides=merge(SMALL, {
        "home": str(work / "home"), "server": {"token": TOKEN, "health_port": health, **server}}))
    work.mkdir(parents=True, exist_ok=True)
    config = work / "driftloop.yaml"
    config.write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    log = open(work / "serve.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "--config", str(config), "serve", "--port",
                             str(port), "--no-gpu", "--check-interval", "3600"], stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    url = f"http://127.0.0.1:{port}"
    try:
        wait_answering(url + "/readyz", proc, lambda: (work / "serve.log").read_text()[-3000:], 120, name="serve")
        yield url, health
    finally:
        proc.kill()
        proc.wait()
        log.close()


def get_status(port: int, path: str, timeout: float = 30.0) -> int:
    """``GET path`` on a fresh connection with a plain socket, as a prober (kubelet, curl) does: the
    client costs microseconds, so the time is the server's. 0 for no answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        head = sock.recv(64)
    parts = head.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def probe(port: int, path: str, stop, out, every: float = 0.1) -> None:  # noqa: ANN001  (multiprocessing objects)
    """In a process of its own (so this process's flood and senders do not hold its GIL): times of
    ``GET path`` on a fresh connection until ``stop``, and how many were not 200, put on ``out``."""
    times, failed = [], 0
    while not stop.is_set():
        started = time.perf_counter()
        try:
            ok = get_status(port, path) == 200
        except OSError:
            ok = False
        times.append(time.perf_counter() - started)
        failed += not ok
        stop.wait(every)
    out.put((times, failed))


@contextmanager
def probing(url: str, health: int) -> Iterator[dict[str, tuple[list[float], int]]]:
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    results: dict[str, tuple[list[float], int]] = {}
    stop = ctx.Event()
    ports = {"main port /livez": int(url.rsplit(":", 1)[1]), "health port /livez": health}
    queues = {name: ctx.Queue() for name in ports}
    procs = [ctx.Process(target=probe, args=(port, "/livez", stop, queues[name])) for name, port in ports.items()]
    for proc in procs:
        proc.start()
    time.sleep(1.0)  # started (a spawned interpreter) before the load
    try:
        yield results
    finally:
        stop.set()
        for name in ports:
            results[name] = queues[name].get(timeout=120)
        for proc in procs:
            proc.join(10)


def report(name: str, probes: dict[str, tuple[list[float], int]]) -> None:
    print(f"{name} ({load()})")
    for where, (times, failed) in probes.items():
        print(f"  {where:<20} {summary(times)}  not 200: {failed}")


def bench_liveness(work: Path, body_mib: float, flood_seconds: float) -> None:
    from tests.faults.test_liveness import Tally, _flood
    from tests.faults.test_memory_bound import _records_body

    with serve(work) as (url, health):
        with probing(url, health) as idle:
            time.sleep(5)
        report("idle (baseline)", idle)

        tally = Tally()
        with probing(url, health) as flooded:
            _flood(int(url.rsplit(":", 1)[1]), flood_seconds, tally)
        report(f"600 keep-alive clients looping /v1/status for {flood_seconds:g} s: answers "
               f"{dict(sorted(tally.answers.items()))}, cut {tally.cut}", flooded)

        body = _records_body(int(body_mib * 2**20))

        def post(_: int) -> int:
            with httpx.Client(timeout=300) as client:
                while True:
                    r = client.post(url + "/v1/predictions", content=body,
                                    headers={**AUTH, "Content-Type": "application/json"})
                    if r.status_code != 503:
                        return r.status_code
                    time.sleep(0.1)

        with probing(url, health) as burst, ThreadPoolExecutor(48) as senders:
            started = time.perf_counter()
            statuses = list(senders.map(post, range(96)))
            took = time.perf_counter() - started
        report(f"96 bodies of {len(body) / 2**20:.1f} MiB, 48 at once, answered {sorted(set(statuses))} "
               f"in {took:.1f} s", burst)


@contextmanager
def burners(n: int) -> Iterator[None]:
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(3 if n else 0)  # let the load average notice
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


@contextmanager
def posting(url: str, batch: list, n: int) -> Iterator[None]:
    """``n`` clients posting ``batch`` again and again (each answered 503 while the store is locked)."""
    stop = threading.Event()

    body = json.dumps(batch).encode()  # encoded once: the clients' CPU is not what is measured

    def client() -> None:
        with httpx.Client(base_url=url, timeout=60) as c:
            while not stop.is_set():
                try:
                    c.post("/v1/predictions", content=body, headers={**AUTH, "Content-Type": "application/json"})
                except httpx.HTTPError:
                    pass

    threads = [threading.Thread(target=client, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    try:
        time.sleep(2 if n else 0)
        yield
    finally:
        stop.set()
        for t in threads:
            t.join(60)


def bench_locked(work: Path, n_burners: int, n_clients: int, repeats: int) -> None:
    from tests.faults.test_dependencies import prediction

    with serve(work) as (url, _), httpx.Client(base_url=url, timeout=60) as c:
        assert c.post("/v1/predictions", json=[prediction(i) for i in range(20)], headers=AUTH).status_code == 200
        c.get("/v1/status", headers=AUTH)  # first use loads MLflow and scipy: not timed
        requests = {
            "GET /livez (baseline)": lambda: c.get("/livez"),
            "GET /readyz": lambda: c.get("/readyz"),
            "POST /v1/predictions": lambda: c.post("/v1/predictions", json=[prediction(10_000)], headers=AUTH),
            "POST /v1/labels": lambda: c.post("/v1/labels", json=[{"id": "p-0", "label": 1}], headers=AUTH),
            "GET /v1/status": lambda: c.get("/v1/status", headers=AUTH),
        }
        batch = [prediction(20_000 + i) for i in range(1000)]
        holder = sqlite3.connect(work / "home" / "driftloop.db", isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            for burning, clients in ((0, 0), (n_burners, 0), (n_burners, n_clients)):
                with burners(burning), posting(url, batch, clients):
                    print(f"SQLite write lock held, busy timeout 30 s, {burning} CPU burners, {clients} clients "
                          f"posting 1,000-record batches in a loop ({load()})")
                    base: list[float] = []
                    for name, send in requests.items():
                        times, statuses = [], set()
                        for _ in range(repeats):
                            started = time.perf_counter()
                            statuses.add(send().status_code)
                            times.append(time.perf_counter() - started)
                        base = base or times
                        ratio = statistics.median(times) / statistics.median(base)
                        over = sum(t >= 1.0 for t in times)
                        print(f"  {name:<24} {summary(times)}  x{ratio:6.1f}  statuses {sorted(statuses)}  "
                              f">= 1 s: {over}")
        finally:
            holder.execute("ROLLBACK")
            holder.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", choices=["liveness", "locked"])
    p.add_argument("--body-mib", type=float, default=4.0, help="size of each of the 96 bodies")
    p.add_argument("--flood-seconds", type=float, default=10.0)
    p.add_argument("--burners", type=int, default=16, help="CPU-spinning processes for the loaded locked-store run")
    p.add_argument("--clients", type=int, default=16, help="clients posting batches during the last locked run")
    p.add_argument("--repeats", type=int, default=20, help="requests per endpoint, locked store")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "liveness"):
            bench_liveness(Path(tmp) / "liveness", args.body_mib, args.flood_seconds)
        if args.only in (None, "locked"):
            bench_locked(Path(tmp) / "locked", args.burners, args.clients, args.repeats)


if __name__ == "__main__":
    main()
