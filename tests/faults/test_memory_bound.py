"""Memory under hostile and heavy uploads: a real ``driftloop serve`` process takes 48 parallel gzip
bodies (bombs past the limit and bodies that inflate to just under it) and 48 plain 1 MiB JSON
bodies, every client retrying on 503 until it is answered. Its RSS (``/proc``) must stay under
the bound docs/operations/faults.md documents, and come back down afterwards.

The bodies parse but are refused (an unknown top-level field, 422) so the store's writes do not
dominate on a two-core machine: what is measured is receiving, decompressing and parsing.
"""
from __future__ import annotations

import gzip
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from pathlib import Path

import httpx
import orjson

from tests.faults.conftest import AUTH, TOKEN
from tests.faults.test_body_limits import rss_bytes
from tests.monitor.daemon.test_serve import served  # noqa: F401  (fixture)

MAX_BODY = 4 * 1024 * 1024
PLAIN = 1024 * 1024
INFLIGHT = 8
PARALLEL = 48
MiB = 2**20


def _records_body(size: int) -> bytes:
    """A ``{"records": [...], "x": 1}`` body of about ``size`` bytes of realistic prediction records."""
    rec = {"id": "r-000000", "features": {**{f"x{i}": 0.123456789 * i for i in range(8)},
                                          "region": "north", "device": "ios"}, "score": 0.42}
    one = len(orjson.dumps(rec)) + 1
    records = [{**rec, "id": f"r-{i:06d}"} for i in range(size // one)]
    return orjson.dumps({"records": records, "x": 1})


def _post(url: str, body: bytes, gzipped: bool) -> int:
    """POST until answered other than 503 (the in-flight cap), as a well-behaved client would."""
    headers = {**AUTH, "Content-Type": "application/json", **({"Content-Encoding": "gzip"} if gzipped else {})}
    deadline = time.monotonic() + 90
    with httpx.Client(timeout=60) as client:
        while True:
            r = client.post(url, content=body, headers=headers)
            if r.status_code != 503 or time.monotonic() > deadline:
                return r.status_code
            time.sleep(0.25)


def _peak_meter(pid: int):
    """A function returning the RSS peak from now on: VmHWM after resetting it (clear_refs 5), or,
    where that is not permitted, the highest of samples taken every 20 ms."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return lambda: rss_bytes(pid, "VmHWM")
    except OSError:
        samples = [rss_bytes(pid)]
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.02):
                samples.append(rss_bytes(pid))

        threading.Thread(target=sample, daemon=True).start()

        def peak() -> int:
            stop.set()
            return max(samples)
        return peak


def test_parallel_gzip_bombs_and_large_bodies_stay_within_the_inflight_budget(make_config, served):
    cfg = make_config({"server": {"max_body_bytes": MAX_BODY, "max_inflight_bodies": INFLIGHT}}, with_champion=False)
    daemon = served(cfg, token=TOKEN).start("--check-interval", "3600")
    url, pid = daemon.url + "/v1/predictions", daemon.proc.pid
    plain = _records_body(PLAIN)
    full = _records_body(MAX_BODY - 64 * 1024)
    inflating = gzip.compress(full, 6)  # ~60x smaller, inflates to just under the limit
    bomb = gzip.compress(full * 8, 9)  # inflates to 8x the limit: 413 from the bounded inflater
    assert len(full) <= MAX_BODY < 8 * len(full)
    assert _post(url, plain, False) == 422  # warm: the first request imports the rest of the app
    time.sleep(0.5)
    before = rss_bytes(pid)
    peak_of = _peak_meter(pid)
    jobs = [(plain, False)] * PARALLEL + [(inflating, True), (bomb, True)] * (PARALLEL // 2)
    started = time.monotonic()
    with ThreadPoolExecutor(len(jobs)) as pool:
        statuses = list(pool.map(lambda job: _post(url, *job), jobs))
    elapsed = time.monotonic() - started
    peak = peak_of()
    time.sleep(2)  # the daemon gives memory back once the burst is over
    after = rss_bytes(pid)
    print(f"\nRSS before {before / MiB:.0f} MiB, peak {peak / MiB:.0f} MiB (+{(peak - before) / MiB:.0f}), "
          f"after {after / MiB:.0f} MiB (+{(after - before) / MiB:.0f}) for {len(jobs)} bodies "
          f"(server.max_body_bytes {MAX_BODY / MiB:.0f} MiB) in {elapsed:.1f} s; statuses {sorted(set(statuses))}")
    assert statuses[:PARALLEL] == [422] * PARALLEL
    assert statuses[PARALLEL:] == [422, 413] * (PARALLEL // 2)
    # The documented bound (docs/operations/faults.md): max_inflight_bodies x max_body_bytes for
    # the bodies held, 4 (bodies inflated and parsed at once) x 7 x max_body_bytes for records like
    # these, and 160 MiB for the allocator's arenas, threads and buffers of a first burst.
    bound = INFLIGHT * MAX_BODY + 4 * 7 * MAX_BODY + 160 * MiB
    assert peak - before < bound, f"RSS grew by {(peak - before) / MiB:.0f} MiB, bound {bound / MiB:.0f} MiB"
    assert after - before < 160 * MiB, f"{(after - before) / MiB:.0f} MiB still held after the burst"
    assert daemon.proc.poll() is None
