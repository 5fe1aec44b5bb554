"""Ingestion memory: what parsing a large body costs, and what the daemon still holds after bursts.

    .venv/bin/python bench/bench_ingest_memory.py            # bodies of 8 and 31 MiB; 5 bursts (~4 min)
    .venv/bin/python bench/bench_ingest_memory.py --quick    # 8 MiB; 2 bursts of 4 (~1 min)
    .venv/bin/python bench/bench_ingest_memory.py --only bursts   # one half (bursts need only `serve`)

* Parse cost: one body of prediction records (8 numeric features of random floats, 2 categorical,
  unique ids) read by a fresh process from a file, so that no memory freed earlier is reused. Peak
  RSS (``VmHWM`` after ``clear_refs``) minus RSS before, over the body's size, and seconds:

  - ``whole``: the body parsed whole with orjson, then validated (the path before chunked parsing,
    still taken by bodies under 1 MiB and by those that cannot be cut): the baseline;
  - ``chunks``: parsed and validated a chunk at a time (``IngestHandler._validated``);
  - ``stored``: the handler's whole path for the body, chunks and the store's rows and write into
    SQLite (``IngestHandler._store``).

* Bursts: ``driftloop serve`` (no champion, default limits) takes ``--bursts`` bursts of
  ``--parallel`` plain bodies of ``--body-mib`` (refused with 422 by an unknown top-level field, so
  that the store does not dominate), as many gzip bodies inflating to just under the limit and as
  many gzip bombs; clients re-send on 503. Per burst: seconds, the peak RSS over idle, and the RSS
  still held over idle 2 s after the burst (``/proc/<pid>/statm``). The baseline is the first burst:
  memory that returns holds about as much after the fifth.
"""
from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MiB = 2**20
TOKEN = "bench-memory-token-0123456789"
DRIFTLOOP = [sys.executable, "-c", "import sys; from monitor.cli import main; sys.exit(main(sys.argv[1:]))"]


def records_body(size: int, prefix: str = "r", extra: bool = False, seed: int = 0) -> bytes:
    """About ``size`` bytes of prediction records of the demo model (x0..x7, region, device)."""
    import numpy as np
    import orjson
    rng = np.random.default_rng(seed)
    one = 300  # bytes a record, about
    n = size // one + 1
    numeric = rng.normal(size=(n, 8)).tolist()
    scores = rng.random(n).tolist()
    regions, devices = ["north", "south", "east", "west"], ["ios", "android", "web"]
    records = [{"id": f"{prefix}-{i:07d}", "score": scores[i],
                "features": {**{f"x{j}": v for j, v in enumerate(numeric[i])},
                             "region": regions[i % 4], "device": devices[i % 3]}} for i in range(n)]
    body = orjson.dumps(records)
    keep = len(records) * size // len(body)
    return orjson.dumps({"records": records[:keep], **({"x": 1} if extra else {})})


# ---- parse cost, in a process of its own ---------------------------------------------------------
def _measure(args: argparse.Namespace) -> None:
    from monitor.config import load_config
    from monitor.ingest import create_app, parsing
    from monitor.ingest.app import Received
    from monitor.store import PredictionStore

    def rss() -> int:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def hwm() -> int:
        line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmHWM:"))
        return int(line.split()[1]) * 1024

    cfg = load_config(environ={}, overrides={"home": args.home, "server": {"max_body_bytes": 64 * MiB,
                                                                           "max_batch_records": 1_000_000}})
    handler = create_app(cfg, PredictionStore.from_config(cfg)).state.ingest_handler
    body = Path(args.body).read_bytes()
    Path("/proc/self/clear_refs").write_text("5")
    before, started = rss(), time.perf_counter()
    if args.how == "whole":
        done = len(handler.store.validator.predictions(parsing.parse_records(body, "json")))
    elif args.how == "chunks":
        done = len(handler._validated(body, "json", "prediction", Received()))
    else:
        done = handler._store(body, None, "json", "prediction", Received()).stored
    print(done, (hwm() - before) / len(body), time.perf_counter() - started)


def parse_costs(sizes: list[int], workdir: Path) -> list[str]:
    rows = []
    for size in sizes:
        body = workdir / f"body-{size}.json"
        body.write_bytes(records_body(size * MiB))
        result = {}
        for how in ("whole", "chunks", "stored"):
            out = subprocess.run([sys.executable, __file__, "_measure", "--how", how, "--body", str(body),
                                  "--home", str(workdir / f"home-{size}-{how}")], capture_output=True, text=True,
                                 timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
            if out.returncode != 0:
                raise SystemExit(out.stderr[-3000:])
            done, ratio, seconds = out.stdout.split()
            result[how] = (int(done), float(ratio), float(seconds))
        n = result["whole"][0]
        (_, whole, whole_s), (_, chunks, chunks_s), (_, stored, stored_s) = (result[h] for h in ("whole", "chunks",
                                                                                                 "stored"))
        rows.append(f"| {body.stat().st_size / MiB:.1f} MiB, {n:,} records | {whole:.1f} × ({whole_s:.2f} s) | "
                    f"{chunks:.1f} × ({chunks_s:.2f} s) | {stored:.1f} × ({stored_s:.2f} s) | {chunks / whole:.2f} |")
    return ["| body | parsed whole, validated (baseline) | in chunks, validated | in chunks, stored | ratio |",
            "|---|---|---|---|---|", *rows]


# ---- bursts against driftloop serve --------------------------------------------------------------
def _rss(pid: int, field: str = "VmRSS") -> int:
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith(field + ":"))
    return int(line.split()[1]) * 1024


def _post(url: str, body: bytes, gzipped: bool) -> int:
    import httpx
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json",
               **({"Content-Encoding": "gzip"} if gzipped else {})}
    deadline = time.monotonic() + 600
    with httpx.Client(timeout=600) as client:
        while True:
            status = client.post(url, content=body, headers=headers).status_code
            if status != 503 or time.monotonic() > deadline:
                return status
            time.sleep(0.25)


def bursts(args: argparse.Namespace, workdir: Path) -> list[str]:
    import httpx
    import yaml

    from monitor.config import load_config
    from tests.support.services import free_port
    port = free_port()
    cfg = load_config(path=None, environ={}, overrides={"home": str(workdir / "serve"), "server": {
        "gpu_metrics": False, "port": port, "max_body_bytes": args.max_body_mib * MiB}})
    (workdir / "serve.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    log = open(workdir / "serve.log", "ab")
    proc = subprocess.Popen([*DRIFTLOOP, "--config", str(workdir / "serve.yaml"), "serve", "--port", str(port),
                             "--no-gpu", "--check-interval", "3600"], stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "DRIFTLOOP_SERVER__TOKEN": TOKEN})
    url = f"http://127.0.0.1:{port}/v1/predictions"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                raise SystemExit((workdir / "serve.log").read_text()[-3000:])
            time.sleep(0.2)
        plain = records_body(int(args.body_mib * MiB), extra=True)
        full = records_body(args.max_body_mib * MiB - 64 * 1024, extra=True)
        inflating, bomb = gzip.compress(full, 6), gzip.compress(full * 8, 9)
        jobs = [(plain, False)] * args.parallel + [(inflating, True), (bomb, True)] * args.parallel
        _post(url, plain, False)  # the first request imports the rest of the app
        time.sleep(2)
        idle = _rss(proc.pid)
        rows = []
        for k in range(args.bursts):
            Path(f"/proc/{proc.pid}/clear_refs").write_text("5")
            started = time.monotonic()
            with ThreadPoolExecutor(len(jobs)) as pool:
                statuses = sorted(set(pool.map(lambda job: _post(url, *job), jobs)))
            seconds = time.monotonic() - started
            peak = _rss(proc.pid, "VmHWM")
            time.sleep(2)
            held = _rss(proc.pid)
            rows.append(f"| {k + 1} | {seconds:.1f} s | +{(peak - idle) / MiB:.0f} MiB | "
                        f"+{(held - idle) / MiB:.0f} MiB | {', '.join(map(str, statuses))} |")
        head = [f"`driftloop serve` idle: {idle / MiB:.0f} MiB; each burst: {args.parallel} bodies of "
                f"{len(plain) / MiB:.1f} MiB, {args.parallel} inflating to {len(full) / MiB:.1f} MiB, "
                f"{args.parallel} gzip bombs (server.max_body_bytes {args.max_body_mib} MiB)", "",
                "| burst | time | peak over idle | held over idle 2 s after | statuses |", "|---|---|---|---|---|"]
        return head + rows
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("role", nargs="?", default="bench", choices=["bench", "_measure"], help=argparse.SUPPRESS)
    p.add_argument("--quick", action="store_true", help="an 8 MiB body; 2 bursts of 4 bodies of 8 MiB")
    p.add_argument("--only", choices=["parse", "bursts"], help="one half of the bench")
    p.add_argument("--sizes", default="8,31", help="body sizes to parse, MiB (default 8,31)")
    p.add_argument("--bursts", type=int, default=5)
    p.add_argument("--parallel", type=int, default=8, help="plain bodies per burst (and as many of each gzip kind)")
    p.add_argument("--body-mib", type=float, default=31)
    p.add_argument("--max-body-mib", type=int, default=32, help="server.max_body_bytes, MiB")
    p.add_argument("--how", help=argparse.SUPPRESS)
    p.add_argument("--body", help=argparse.SUPPRESS)
    p.add_argument("--home", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.role == "_measure":
        _measure(args)
        return
    if args.quick:
        args.sizes, args.bursts, args.parallel, args.body_mib, args.max_body_mib = "8", 2, 4, 8, 8
    with tempfile.TemporaryDirectory(prefix="bench-ingest-memory-") as tmp:
        workdir = Path(tmp)
        if args.only != "bursts":
            print("\n".join(parse_costs([int(s) for s in args.sizes.split(",")], workdir)) + "\n", flush=True)
        if args.only != "parse":
            print("\n".join(bursts(args, workdir)))


if __name__ == "__main__":
    main()
