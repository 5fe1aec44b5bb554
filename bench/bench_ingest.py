"""Ingestion benchmark: predictions/s over HTTP and through monitor.client, and window reads,
each against a raw baseline measured in the same run on the same SQLite file.

    .venv/bin/python bench/bench_ingest.py              # 200k records over HTTP, windows of 100k and 1M rows
    .venv/bin/python bench/bench_ingest.py --quick      # a smaller run (about a minute)

* HTTP: a real uvicorn server in a subprocess (the app of ``driftloop serve``'s ingestion part), a
  client process posting pre-serialised JSON batches of ``--batch`` records x ``--features`` features
  on ``--concurrency`` keep-alive connections. Baseline: ``executemany`` of the same rows, as ready
  tuples, into the same table, one transaction per batch.

    .venv/bin/python bench/bench_ingest.py --only load --clients 1,8 --postgres   # ~3 min

* Load (``--only load``, or part of the full run): ``--records`` predictions over HTTP from 1 and 8
  clients (``--clients``), a fresh store each, medians of ``--repeats``: rows/s, request latency
  p50/p99, the server's and the client's CPU per batch, the load average, and exact counts (every
  response's ``stored`` summed, the table's count, and ``--resend`` batches sent again answered as
  duplicates). ``--postgres`` repeats it on a private
  PostgreSQL with its default durability (fsync, synchronous commit) started for the run, or on
  ``--postgres-url`` (an admin URL; a database is created per run). Baselines as above: SQLite
  ``executemany``; PostgreSQL psycopg ``executemany``, one transaction per batch.
* Client: ``DriftloopClient.log_predictions(DataFrame)`` in a separate process (DataFrame to JSON
  included) against the same server.
* Window: ``PredictionStore.window()`` for the newest N rows (joined with labels, half labelled).
  Baseline: ``pandas.read_sql_query`` of the same SQL on a sqlite3 connection.

    .venv/bin/python bench/bench_ingest.py --embedding-dim 768 --embedding-rows 3000

* Embeddings (this mode alone): rows of one ``dim``-long embedding feature against the same
  numbers as ``dim`` numeric columns (``x0..x767``): ingest rate (the server's work per batch: the
  JSON body parsed with orjson, validated, stored in one transaction; no HTTP) and the SQLite file's
  bytes per row (growth of the file after a checkpoint / rows). A fresh store per repeat; medians.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


CLASSES = [f"class_{i}" for i in range(10)]  # --task multiclass: a 10-class model


def _config(home: Path, features: int, categorical: int, store_url: str | None = None, task: str = "binary"):
    from monitor.config import load_config
    feats = [{"name": f"x{i}"} for i in range(features - categorical)]
    feats += [{"name": f"c{i}", "type": "categorical"} for i in range(categorical)]
    model = {"name": "bench", "features": feats, "task": task, **({"classes": CLASSES} if task == "multiclass" else {})}
    overrides = {"home": str(home), "model": model,
                 "server": {"max_batch_records": 1_000_000}}
    if store_url:
        overrides["store"] = {"url": store_url}
    return load_config(environ={}, overrides=overrides)


def _records(prefix: str, n: int, features: int, categorical: int, seed: int = 0,
             task: str = "binary") -> list[dict]:
    import numpy as np
    rng = np.random.default_rng(seed)
    numeric = rng.normal(size=(n, features - categorical)).round(6).tolist()
    cats = ["eu", "us", "apac", "latam"]
    if task == "multiclass":  # one probability per class, summing to 1
        weights = rng.random((n, len(CLASSES)))
        outputs = [{"probabilities": row} for row in (weights / weights.sum(axis=1, keepdims=True)).tolist()]
    elif task == "regression":
        outputs = [{"prediction": v} for v in rng.normal(100, 15, n).round(3).tolist()]
    else:
        outputs = [{"score": v} for v in rng.random(n).round(6).tolist()]
    t0 = 1_790_000_000.0
    out = []
    for i in range(n):
        f = {f"x{j}": v for j, v in enumerate(numeric[i])}
        for j in range(categorical):
            f[f"c{j}"] = cats[(i + j) % 4]
        out.append({"id": f"{prefix}-{i}", "ts": t0 + i * 0.001, "features": f, **outputs[i]})
    return out


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


# ---- subprocess roles ---------------------------------------------------------------------------
def serve(args: argparse.Namespace) -> None:
    import uvicorn

    from monitor.ingest import create_app
    from monitor.store import PredictionStore
    cfg = _config(Path(args.home), args.features, args.categorical, args.store_url, args.task)
    store = PredictionStore.from_config(cfg)
    uvicorn.run(create_app(cfg, store), host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


def post(args: argparse.Namespace) -> None:
    """Post pre-serialised batches on N keep-alive connections; print throughput, per-request
    latency and this client's own CPU per batch. The stdlib's ``http.client``, not httpx: on a
    2-core machine every millisecond the client spends is one the server does not get."""
    import http.client
    import threading
    from urllib.parse import urlsplit

    import orjson
    records = _records(args.prefix, args.records, args.features, args.categorical, seed=1, task=args.task)
    bodies = [orjson.dumps(records[i:i + args.batch]) for i in range(0, len(records), args.batch)]
    del records
    latencies: list[float] = []
    failures: list[str] = []
    counts = {"stored": 0, "duplicates": 0}
    lock = threading.Lock()
    where = urlsplit(args.url)
    headers = {"Content-Type": "application/json"}

    def run(order: list[int], connections: int, timed: list[float] | None) -> None:
        pending = iter(order)

        def worker() -> None:
            conn = http.client.HTTPConnection(where.hostname, where.port, timeout=120)
            try:
                while True:
                    with lock:
                        k = next(pending, None)
                    if k is None:
                        return
                    t = time.perf_counter()
                    conn.request("POST", "/v1/predictions", body=bodies[k], headers=headers)
                    response = conn.getresponse()
                    text = response.read()
                    dt = time.perf_counter() - t
                    with lock:
                        if timed is not None:
                            timed.append(dt)
                        if response.status != 200:
                            failures.append(f"{response.status} {text[:200]!r}")
                        else:
                            answer = orjson.loads(text)
                            for key in counts:
                                counts[key] += answer[key]
            finally:
                conn.close()

        threads = [threading.Thread(target=worker) for _ in range(connections)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    start, cpu = time.perf_counter(), time.process_time()
    run(list(range(len(bodies))), args.concurrency, latencies)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    sent = dict(counts)
    counts.update(stored=0, duplicates=0)
    run(list(range(min(args.resend, len(bodies)))), args.concurrency, None)  # idempotent re-sends, untimed
    print(json.dumps({"wall": wall, "client_cpu": cpu / len(bodies), "latencies": latencies, "failures": failures[:5],
                      "counts": sent,
                      "resent": dict(counts)}))


def post_client(args: argparse.Namespace) -> None:
    import pandas as pd

    from monitor.client import DriftloopClient
    records = _records(args.prefix, args.records, args.features, args.categorical, seed=2)
    frame = pd.DataFrame([{"id": r["id"], "ts": pd.Timestamp(r["ts"], unit="s", tz="UTC"), **r["features"],
                           "score": r["score"]} for r in records])
    del records
    with DriftloopClient(args.url, batch_size=args.batch) as client:
        start = time.perf_counter()
        summary = client.log_predictions(frame)
        wall = time.perf_counter() - start
    print(json.dumps({"wall": wall, "stored": summary.stored}))


# ---- measurements -------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _subprocess(role: str, args: argparse.Namespace, **extra) -> list[str]:
    cmd = [sys.executable, str(Path(__file__).resolve()), role, "--features", str(args.features),
           "--categorical", str(args.categorical), "--batch", str(args.batch), "--task", args.task]
    for k, v in extra.items():
        cmd += [f"--{k.replace('_', '-')}", str(v)]
    return cmd


def _rows(batch, now: int) -> list[tuple]:
    """A validated batch as the store's insert tuples (model_version and input_uri empty), in the
    order of ``PredictionStore.add_predictions``."""
    n = len(batch)
    return list(zip(batch.ids, batch.ts, *batch.features, batch.scores, batch.predictions, [now] * n,
                    [None] * n, *(batch.probas or ()), [None] * n))


def raw_insert_rate(store, n: int, args: argparse.Namespace) -> float:
    """Baseline: rows ready as tuples, executemany into the store's table, one commit per batch."""
    records = _records("raw", n, args.features, args.categorical, seed=3, task=args.task)
    batch = store.validator.predictions(records)
    now = int(time.time() * 1e6)
    rows = _rows(batch, now)
    conn = sqlite3.connect(store.engine.url.database, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")  # as the store (store.sqlite_synchronous default)
    sql = store._prediction_rows.single
    start = time.perf_counter()
    for i in range(0, n, args.batch):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(sql, rows[i:i + args.batch])
        conn.execute("COMMIT")
    wall = time.perf_counter() - start
    conn.close()
    return n / wall


@contextmanager
def _server(home: Path, args: argparse.Namespace, store_url: str | None = None) -> Iterator[tuple[str, int]]:
    """A benchmark server on a free port (the store under ``home``, or ``store_url``); yields its URL and pid."""
    import httpx
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    extra = {"store_url": store_url} if store_url else {}
    server = subprocess.Popen(_subprocess("_serve", args, home=home, port=port, **extra))
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("the benchmark server did not start")
            time.sleep(0.2)
        yield url, server.pid
    finally:
        server.terminate()
        server.wait(20)


def _post_load(url: str, clients: int, args: argparse.Namespace, prefix: str) -> dict:
    out = subprocess.run(_subprocess("_post", args, url=url, records=args.records, prefix=prefix,
                                     concurrency=clients, resend=args.resend), capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"the load client failed: {out.stderr[-2000:]}")
    result = json.loads(out.stdout)
    if result["failures"]:
        raise RuntimeError(f"posts failed: {result['failures']}")
    return result


def http_rates(home: Path, args: argparse.Namespace) -> dict:
    with _server(home, args) as (url, _):
        http = _post_load(url, args.concurrency, args, "http")
        out = subprocess.run(_subprocess("_client", args, url=url, records=args.client_records, prefix="client"),
                             capture_output=True, text=True, check=True)
        client = json.loads(out.stdout)
    return {"http_rate": args.records / http["wall"], "lat_median": statistics.median(http["latencies"]),
            "lat_p99": _pct(http["latencies"], 0.99), "client_rate": args.client_records / client["wall"]}


def load_run(home: Path, clients: int, args: argparse.Namespace, store_url: str | None = None) -> dict:
    """One load run into a fresh store: rate, latency and the exact-count checks."""
    from monitor.store import PredictionStore
    with _server(home, args, store_url) as (url, pid):
        cpu = _cpu_seconds(pid)
        result = _post_load(url, clients, args, "load")
        cpu = _cpu_seconds(pid) - cpu
    cfg = _config(home, args.features, args.categorical, store_url, args.task)
    with PredictionStore.from_config(cfg) as store:
        in_table = store.row_counts()["predictions"]
    resent_rows = min(args.resend * args.batch, args.records)
    exact = (result["counts"] == {"stored": args.records, "duplicates": 0} and in_table == args.records
             and result["resent"] == {"stored": 0, "duplicates": resent_rows})
    if not exact:
        raise RuntimeError(f"counts are off: sent {args.records}, answered {result['counts']}, table has "
                           f"{in_table}, re-sent {resent_rows} answered {result['resent']}")
    lat = result["latencies"]
    return {"rate": args.records / result["wall"], "p50": statistics.median(lat), "p99": _pct(lat, 0.99),
            "cpu": cpu / (args.records + resent_rows) * args.batch, "client_cpu": result["client_cpu"],
            "load": os.getloadavg()[0]}


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc): the server's cost, whatever else runs."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def postgres_raw_rate(url: str, args: argparse.Namespace) -> float:
    """PostgreSQL baseline: psycopg ``executemany`` of ready tuples into the store's table, one
    transaction per batch (each commit waits for the WAL flush, as the store's do)."""
    import psycopg

    from monitor.store import PredictionStore
    cfg = _config(Path(tempfile.gettempdir()), args.features, args.categorical, url, args.task)
    with PredictionStore.from_config(cfg) as store:
        records = _records("raw", args.records, args.features, args.categorical, seed=3, task=args.task)
        batch = store.validator.predictions(records)
        now = int(time.time() * 1e6)
        rows = _rows(batch, now)
        sql = store._prediction_rows.single.replace("?", "%s")
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        start = time.perf_counter()
        for i in range(0, len(rows), args.batch):
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(sql, rows[i:i + args.batch])
        wall = time.perf_counter() - start
    return len(rows) / wall


def load_table(workdir: Path, args: argparse.Namespace, raw_sqlite: float) -> list[str]:
    """Markdown rows: each store x each client count, medians of ``--repeats`` runs."""
    stores: list[tuple[str, Callable[[], str | None], float]] = [("SQLite", lambda: None, raw_sqlite)]
    server = None
    if args.postgres or args.postgres_url:
        admin = args.postgres_url
        if admin is None:
            from tests.support.postgres import start_postgres
            server = start_postgres(durable=True)
            admin = server.admin_url
        made = iter(range(1_000_000))

        def fresh() -> str:
            import psycopg
            name = f"bench_{os.getpid()}_{next(made)}"
            with psycopg.connect(admin.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            return admin.rsplit("/", 1)[0] + "/" + name
        stores.append(("PostgreSQL", fresh, postgres_raw_rate(fresh(), args)))
    rows = []
    try:
        for name, fresh_url, raw in stores:
            for clients in args.client_counts:
                runs = [load_run(workdir / f"load-{name}-{clients}-{r}", clients, args, fresh_url())
                        for r in range(args.repeats)]
                rate, p50, p99, cpu, client, load = (statistics.median(run[k] for run in runs) for k in
                                                     ("rate", "p50", "p99", "cpu", "client_cpu", "load"))
                rows.append(f"| {name}, {clients} client{'s' if clients > 1 else ''} | {rate:,.0f} rows/s "
                            f"| {p50 * 1000:.0f} ms | {p99 * 1000:.0f} ms | {cpu * 1000:.1f} ms "
                            f"| {client * 1000:.1f} ms | {load:.1f} | {raw:,.0f} rows/s | {rate / raw:.2f} | yes |")
    finally:
        if server is not None:
            server.stop()
    return rows


def populate(store, n: int, args: argparse.Namespace) -> None:
    """Fill the store with n predictions (every other one labelled), fast, untimed."""
    chunk = 50_000
    for start in range(0, n, chunk):
        k = min(chunk, n - start)
        records = _records(f"w{start}", k, args.features, args.categorical, seed=start)
        store.add_predictions(records)
        store.add_labels([{"id": r["id"], "label": i % 2,
                           "ts": r["ts"] + 3600} for i, r in enumerate(records) if i % 2 == 0])


def window_times(store, rows: int, args: argparse.Namespace) -> dict:
    import pandas as pd

    from monitor.store import window as W
    query = W.build_query(store.tables, store.model, store._q, last_n=rows)
    ours, base = [], []
    for _ in range(args.repeats):
        t = time.perf_counter()
        frame = store.window(last_n=rows)
        ours.append(time.perf_counter() - t)
        assert len(frame) == rows, (len(frame), rows)
        del frame
        conn = sqlite3.connect(store.engine.url.database)
        t = time.perf_counter()
        frame = pd.read_sql_query(query.sql, conn, params=query.params)
        base.append(time.perf_counter() - t)
        conn.close()
        del frame
    return {"ours": statistics.median(ours), "base": statistics.median(base)}


def embedding_ingest(workdir: Path, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Median ingest rate (rows/s) and stored bytes per row for ``--embedding-dim`` as one embedding
    feature ("embedding") and as that many numeric columns ("numeric"), from the same vectors."""
    import numpy as np
    import orjson

    from monitor.config import load_config
    from monitor.store import PredictionStore
    dim, n, batch = args.embedding_dim, args.embedding_rows, args.batch
    vectors = np.random.default_rng(0).normal(size=(n, dim)).astype(np.float32).tolist()
    shapes = {"embedding": ([{"name": "emb", "type": "embedding", "dim": dim}], lambda v: {"emb": v}),
              "numeric": ([{"name": f"x{j}"} for j in range(dim)], lambda v: {f"x{j}": x for j, x in enumerate(v)})}
    out: dict[str, dict[str, float]] = {}
    for kind, (features, as_features) in shapes.items():
        bodies = [orjson.dumps([{"id": f"r{i}", "ts": 1_790_000_000.0 + i, "features": as_features(vectors[i]),
                                 "score": 0.5} for i in range(start, min(n, start + batch))])
                  for start in range(0, n, batch)]
        rates, sizes = [], []
        for repeat in range(args.repeats):
            home = workdir / f"emb-{kind}-{repeat}"
            cfg = load_config(environ={}, overrides={"home": str(home),
                                                     "model": {"name": "bench", "features": features},
                                                     "server": {"max_batch_records": 1_000_000}})
            with PredictionStore.from_config(cfg) as store:
                path = Path(str(store.engine.url.database))
                store.engine.dispose()
                before = path.stat().st_size
                t0 = time.perf_counter()
                for body in bodies:
                    store.add_predictions(orjson.loads(body))
                rates.append(n / (time.perf_counter() - t0))
                with sqlite3.connect(path) as conn:
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                store.engine.dispose()
                sizes.append((path.stat().st_size - before) / n)
        out[kind] = {"rate": statistics.median(rates), "bytes": statistics.median(sizes),
                     "body": statistics.median(len(b) for b in bodies) / batch}
    return out


def print_embedding_table(result: dict[str, dict[str, float]], args: argparse.Namespace) -> None:
    e, x = result["embedding"], result["numeric"]
    print(f"\ndriftloop embedding ingest: {args.embedding_rows:,} rows x {args.embedding_dim} values, batches of "
          f"{args.batch}, SQLite, median of {args.repeats}, {os.cpu_count()} CPUs\n")
    print(f"| measurement | 1 embedding feature (dim {args.embedding_dim}) | {args.embedding_dim} numeric columns "
          "| ratio |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| ingest (parse + validate + store) | {e['rate']:,.0f} rows/s | {x['rate']:,.0f} rows/s "
          f"| {e['rate'] / x['rate']:.2f} |")
    print(f"| stored bytes per row (SQLite file) | {e['bytes']:,.0f} | {x['bytes']:,.0f} | "
          f"{e['bytes'] / x['bytes']:.2f} |")
    print(f"| JSON body bytes per record | {e['body']:,.0f} | {x['body']:,.0f} | {e['body'] / x['body']:.2f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("role", nargs="?", default="bench", choices=["bench", "_serve", "_post", "_client"],
                   help=argparse.SUPPRESS)
    p.add_argument("--records", type=int, default=200_000, help="predictions posted over HTTP")
    p.add_argument("--client-records", type=int, default=100_000, help="predictions sent through monitor.client")
    p.add_argument("--batch", type=int, default=1000, help="records per request")
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--categorical", type=int, default=2, help="how many of the features are categorical")
    p.add_argument("--concurrency", type=int, default=2, help="connections posting at once")
    p.add_argument("--window-rows", default="100000,1000000", help="window sizes to read, comma-separated")
    p.add_argument("--repeats", type=int, default=3, help="window reads per size (median reported)")
    p.add_argument("--quick", action="store_true", help="20k records, windows of 20k and 100k rows")
    p.add_argument("--workdir", help="keep the data here instead of a temporary folder")
    p.add_argument("--embedding-dim", type=int, help="run only the embedding mode: one feature of this dim "
                                                     "against as many numeric columns")
    p.add_argument("--embedding-rows", type=int, default=3000, help="rows per repeat in the embedding mode")
    p.add_argument("--only", choices=["all", "load"], default="all",
                   help="load: only the 1- and 8-client load table (no monitor.client, no windows)")
    p.add_argument("--clients", default="1,8", help="client counts of the load table, comma-separated")
    p.add_argument("--resend", type=int, default=8, help="batches re-sent after each load run (must be duplicates)")
    p.add_argument("--task", choices=["binary", "multiclass", "regression"], default="binary",
                   help="the model's task (multiclass: 10 classes); other than binary with --only load")
    p.add_argument("--postgres", action="store_true", help="also load a private PostgreSQL (default durability)")
    p.add_argument("--postgres-url", help="also load this PostgreSQL (admin URL; a database per run)")
    for internal in ("--home", "--url", "--prefix", "--store-url"):  # used by the subprocess roles
        p.add_argument(internal, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.role == "_serve":
        return serve(args)
    if args.role == "_post":
        return post(args)
    if args.role == "_client":
        return post_client(args)
    if args.quick:  # smaller presets, for whatever was not given explicitly
        for name, value in (("records", 20_000), ("client_records", 10_000), ("window_rows", "20000,100000"),
                            ("repeats", 2)):
            if getattr(args, name) == p.get_default(name):
                setattr(args, name, value)
    sizes = [int(s) for s in args.window_rows.split(",") if s]
    args.client_counts = [int(c) for c in args.clients.split(",") if c]
    if args.task != "binary" and args.only != "load" and args.role == "bench":
        p.error("--task multiclass / regression is measured with --only load")
    if args.embedding_dim:
        workdir = Path(args.workdir or tempfile.mkdtemp(prefix="driftloop-bench-"))
        try:
            return print_embedding_table(embedding_ingest(workdir, args), args)
        finally:
            if not args.workdir:
                shutil.rmtree(workdir, ignore_errors=True)

    from monitor.store import PredictionStore
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="driftloop-bench-"))
    try:
        home = workdir / "ingest"
        cfg = _config(home, args.features, args.categorical, task=args.task)
        with PredictionStore.from_config(cfg) as store:
            raw_rate = raw_insert_rate(store, args.records, args)
        load = load_table(workdir, args, raw_rate)
        if args.only == "all":
            http = http_rates(workdir / "http", args)
            wcfg = _config(workdir / "window", args.features, args.categorical)
            with PredictionStore.from_config(wcfg) as store:
                populate(store, max(sizes), args)
                windows = {n: window_times(store, n, args) for n in sizes}
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)

    print(f"\ndriftloop ingestion under load ({args.task}): {args.records:,} predictions over HTTP in batches of "
          f"{args.batch} x "
          f"{args.features} features ({args.categorical} categorical), median of {args.repeats} runs, "
          f"{os.cpu_count()} CPUs\n")
    print("| store, clients | driftloop | p50 latency | p99 latency | server CPU per batch | client CPU per batch "
          "| load average | raw baseline (executemany) | ratio | exact counts |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    print("\n".join(load))
    if args.only == "load":
        return
    print(f"\ndriftloop ingestion benchmark: batches of {args.batch} x {args.features} features "
          f"({args.categorical} categorical), SQLite, {os.cpu_count()} CPUs\n")
    print("| measurement | driftloop | raw baseline | ratio |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| HTTP ingest, {args.records:,} predictions, {args.concurrency} connections | {http['http_rate']:,.0f} /s "
          f"| {raw_rate:,.0f} /s (executemany) | {http['http_rate'] / raw_rate:.2f} |")
    print(f"| monitor.client from a DataFrame, {args.client_records:,} predictions | {http['client_rate']:,.0f} /s "
          f"| {raw_rate:,.0f} /s (executemany) | {http['client_rate'] / raw_rate:.2f} |")
    for n, t in windows.items():
        print(f"| window read, {n:,} rows (joined, typed DataFrame) | {t['ours']:.2f} s | {t['base']:.2f} s "
              f"(pandas.read_sql_query) | {t['ours'] / t['base']:.2f} |")
    print(f"\nHTTP request latency per batch: median {http['lat_median'] * 1000:.1f} ms, "
          f"p99 {http['lat_p99'] * 1000:.1f} ms")

if __name__ == "__main__":
    main()
