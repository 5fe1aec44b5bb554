"""Benchmark: many models in one daemon process. 1, 10 and 50 models served by one ``driftloop serve``.

    .venv/bin/python bench/bench_fleet.py                 # 1, 10 and 50 models (about 10 minutes on 2 cores)
    .venv/bin/python bench/bench_fleet.py --quick         # 1 and 10 models, shorter intervals (smoke run)
    .venv/bin/python bench/bench_fleet.py --models 1,20   # other fleet sizes (the first is the baseline)

Setup, not timed: one tiny binary champion is trained (``trainer.train_baseline`` on synthetic rows,
a few epochs) and registered as ``champion`` of every model's own registered model
(``driftloop-<name>``), so each model loads, holds and checks against a champion of its own, as in a
real deployment, without training fifty networks. Each fleet size then runs in a fresh process, the
same ``serve()`` that ``driftloop serve`` runs (``freeze_heap``, each model checked against its
champion's schema), on a fresh SQLite store under a temporary home, with SQLite MLflow:

1. start-up: seconds until every model runs and has made its first (empty) check;
2. memory: the process's RSS (``/proc``), idle after start-up and again after traffic and checks;
   per model = (RSS with N models - RSS with the first size) / (N - first size), the first size
   measured in the same run;
3. ingest at equal total traffic: ``--rows`` predictions in all, in ``--passes`` timed passes, each
   spread evenly over the N models and posted to ``/v1/models/{name}/predictions`` in batches of
   ``--batch`` on ``--senders`` keep-alive connections (the batches interleave the models), after one
   untimed request per model; rows/s is the median of the passes that no check overlapped (a check
   takes the CPU the ingestion would get), with the daemon's CPU per 1,000 rows (steadier than a rate
   on a shared machine) and the per-request latency; a 503 (the store's lock held past
   ``store.request_wait_seconds``) is retried as the client retries it, and counted. Labels for every
   row follow, untimed, so the checks judge performance too;
4. checks: every model's scheduled check (``drift.interval_seconds`` = ``--interval``, all models due
   together, ``fleet.check_workers`` threads) over a window of ``--window`` rows, for ``--rounds``
   checks per model after the labels arrived; the check's own duration (``check_results``) median and
   p95, and the server's CPU seconds per check;
5. scheduling delay: how late each check started past its due time, exactly as the fleet records
   it (``fleet.jobs.delays``, the source of ``driftloop_fleet_check_delay_seconds``, also scraped
   from ``/metrics``), and the due checks APScheduler skipped because the model's previous check was
   still running or waiting for a thread (``max_instances=1``: a skipped run is never recorded as a
   delay, so a delay stays under about one interval however far the pool falls behind, and the
   skips are the sign of it); the goal is no check delayed by more than one interval, none skipped.
6. stop: seconds from SIGTERM to exit (a daemon that has not exited after 30 s is killed, its
   threads' stacks left in its ``serve.log``).

Alert thresholds are set out of reach so that no retrain child runs during the measurement.
Prints a table with each figure and its ratio to the first size.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MiB = 2**20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")


def _rss(pid: int) -> int:
    """Resident set size of a process in bytes (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def model_names(n: int) -> list[str]:
    return [f"m{i:02d}" for i in range(n)]


# ---- configuration and champions ----------------------------------------------------------------
def write_config(path: Path, home: Path, tracking_uri: str, port: int, names: list[str],
                 args: argparse.Namespace) -> Path:
    """A deployment of ``names``, every model with the demo schema and the same settings."""
    import yaml
    data = {
        "home": str(home),
        "logging": {"level": "WARNING"},
        "server": {"port": port, "gpu_metrics": False, "max_batch_records": 100_000},
        "mlflow": {"tracking_uri": tracking_uri},
        "fleet": {"check_workers": args.workers},
        "drift": {"interval_seconds": args.interval, "window_size": args.window,
                  "min_labels": min(500, args.window)},
        # Out of reach: a retrain child would measure the trainer, not the fleet.
        "alerts": {"accuracy_drop": 0.9, "auc_drop": 0.9, "cooldown_seconds": 86400},
        "training": {"epochs": args.epochs, "min_rows": 100, "checkpoint_every_minutes": 60, "progress": False},
        "models": {name: {} for name in names},
    }
    path.write_text(yaml.safe_dump(data))
    return path


def train_shared_champion(config: Path, args: argparse.Namespace) -> None:
    """Train one champion for the first model and register its artefact as ``champion`` of every
    other model's registered model (its own versions, aliases and history; one trained network)."""
    import trainer
    from monitor.config import load_config
    from trainer import registry as reg
    from trainer.synthetic import make_dataset

    cfg = load_config(config, environ={})
    configs = cfg.model_configs()
    first, *rest = configs.values()
    trainer.train_baseline(first, make_dataset(args.train_rows, seed=1), trigger="manual")
    with reg.session(first), reg.translating(first, "sharing the champion"):
        source = reg.Registry(first)
        version = source.alias_version(reg.CHAMPION)
        assert version is not None
        mv = source.client.get_model_version(source.name, version)
        assert mv.source is not None and mv.run_id is not None
        for model_cfg in rest:
            registry = reg.Registry(model_cfg)
            registry.make_champion(registry.register(mv.source, mv.run_id, getattr(mv, "model_id", None)))


# ---- traffic ------------------------------------------------------------------------------------
def traffic(config: Path, names: list[str], total: int, batch: int, seed: int,
            prefix: str = "r") -> tuple[list, list]:
    """(name, body) prediction batches and label batches: ``total`` rows scored by the champion,
    split evenly over ``names``, interleaved model by model."""
    import numpy as np
    import orjson

    import trainer
    from monitor.config import load_config
    from trainer.synthetic import make_dataset

    cfg = load_config(config, environ={}).for_model(names[0])
    data = make_dataset(total, seed=seed)
    features = data[cfg.model.feature_names]
    scores = np.asarray(trainer.load_champion(cfg).predict_proba(features), dtype=float)
    rows = features.to_dict(orient="records")
    labels = data[cfg.model.target].astype(int).tolist()
    per_model = total // len(names)
    predictions: list[list[tuple[str, bytes]]] = []
    label_batches: list[list[tuple[str, bytes]]] = []
    for m, name in enumerate(names):
        lo = m * per_model
        p_out, l_out = [], []
        for start in range(lo, lo + per_model, batch):
            stop = min(start + batch, lo + per_model)
            p_out.append((name, orjson.dumps([{"id": f"{prefix}{i}", "features": rows[i], "score": float(scores[i])}
                                              for i in range(start, stop)])))
            l_out.append((name, orjson.dumps([{"id": f"{prefix}{i}", "label": labels[i]} for i in range(start, stop)])))
        predictions.append(p_out)
        label_batches.append(l_out)
    # Round robin over the models (each has as many batches), so concurrent senders hit different models.
    return ([b for group in zip(*predictions) for b in group],
            [b for group in zip(*label_batches) for b in group])


def post_all(port: int, kind: str, batches: list[tuple[str, bytes]],
             senders: int) -> tuple[float, list[float], int]:
    """Post every batch on ``senders`` keep-alive connections; (wall seconds, per-request latencies,
    503/429 answers). A 503 or 429 (the store's lock held past ``store.request_wait_seconds``) is
    retried after a short pause, as :class:`monitor.client.DriftloopClient` retries it; the latency is
    the whole request's, retries included. The stdlib's http.client: on 2 cores the sender's CPU is
    taken from the server."""
    import http.client

    pending = iter(batches)
    lock = threading.Lock()
    latencies: list[float] = []
    failures: list[str] = []
    retried = [0]
    headers = {"Content-Type": "application/json"}

    def worker() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            while True:
                with lock:
                    item = next(pending, None)
                if item is None:
                    return
                name, body = item
                t = time.perf_counter()
                for attempt in range(10):
                    conn.request("POST", f"/v1/models/{name}/{kind}", body=body, headers=headers)
                    response = conn.getresponse()
                    text = response.read()
                    if response.status not in (429, 503):
                        break
                    with lock:
                        retried[0] += 1
                    time.sleep(min(2.0, 0.1 * 2**attempt))
                dt = time.perf_counter() - t
                with lock:
                    latencies.append(dt)
                    if response.status != 200:
                        failures.append(f"{name}: {response.status} {text[:200]!r}")
        finally:
            conn.close()

    threads = [threading.Thread(target=worker) for _ in range(senders)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"{len(failures)} {kind} posts failed, e.g. {failures[:3]}")
    return wall, latencies, retried[0]


# ---- the daemon process -------------------------------------------------------------------------
class _KeptList(list):
    """One model's list in ``fleet.jobs.delays`` that also keeps each value in ``kept``."""

    def __init__(self, kept: list[float]):
        super().__init__()
        self.kept = kept

    def append(self, value: float) -> None:
        self.kept.append(value)
        super().append(value)


class _KeptDelays(dict):
    """``fleet.jobs.delays`` that keeps every delay: each ``/metrics`` scrape drains the lists it
    reads into its histogram, and the bench wants the exact values too."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: dict[str, list[float]] = {}

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = _KeptList(self.kept.setdefault(key, []))
        return self[key]


def serve_role(config: str, figures_out: str) -> None:
    """What ``driftloop serve`` runs, with the fleet kept so that its exact delays, and the checks
    APScheduler skipped (one of the model's still running or waiting), are written to
    ``figures_out`` every second."""
    import faulthandler
    import logging

    from apscheduler.events import EVENT_JOB_MAX_INSTANCES

    from monitor.commands._schema import with_champion_schema
    from monitor.config import load_config
    from monitor.daemon.runtime.facade import install_signal_handlers, serve
    from monitor.daemon.runtime.fleet import Fleet

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 <pid>: every thread's stack in serve.log
    cfg = load_config(config, environ={})
    stop, reload = threading.Event(), threading.Event()
    install_signal_handlers(stop, reload)
    fleet = Fleet(cfg, prepare=with_champion_schema)
    delays = fleet.jobs.delays = _KeptDelays()
    skipped: dict[str, int] = {}

    def on_skipped(event: Any) -> None:
        if str(event.job_id).endswith(":check"):
            model = str(event.job_id).rsplit(":", 1)[0]
            skipped[model] = skipped.get(model, 0) + 1
    fleet.jobs._scheduler.add_listener(on_skipped, EVENT_JOB_MAX_INSTANCES)

    def write() -> None:
        tmp = Path(figures_out + ".tmp")
        tmp.write_text(json.dumps({"delays": delays.kept, "skipped": skipped}))
        os.replace(tmp, figures_out)

    def keep_writing() -> None:
        while True:
            write()
            time.sleep(1.0)
    threading.Thread(target=keep_writing, daemon=True).start()
    serve(cfg, stop, freeze_heap=True, fleet=fleet)
    write()
    logging.shutdown()
    os._exit(0)


class Server:
    def __init__(self, config: Path, port: int, workdir: Path):
        self.port = port
        self.figures_path = workdir / "scheduling.json"
        self.log_path = workdir / "serve.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "_serve", str(config),
                                      str(self.figures_path)], cwd=str(ROOT), stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def get(self, path: str) -> Any:
        import httpx
        r = httpx.get(f"http://127.0.0.1:{self.port}{path}", timeout=30)
        r.raise_for_status()
        return r.json() if "json" in r.headers.get("content-type", "") else r.text

    def listing(self) -> list[dict]:
        return self.get("/v1/models")["models"]

    def wait(self, ready: Any, timeout: float, what: str) -> Any:
        """Poll ``ready()`` (None/False: not yet) until it answers."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the daemon exited with {self.proc.returncode}; see {self.log_path}")
            try:
                answer = ready()
            except Exception:  # not listening yet
                answer = None
            if answer:
                return answer
            time.sleep(0.25)
        raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}; see {self.log_path}")

    def stop(self, grace: float = 30.0) -> tuple[float, bool]:
        """SIGTERM, as a supervisor stops ``driftloop serve``; (seconds to exit, whether it hung and
        was killed after ``grace`` seconds, its threads' stacks left in serve.log)."""
        started = time.monotonic()
        hung = False
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                hung = True
                self.proc.send_signal(signal.SIGUSR1)
                time.sleep(1.0)
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
        return time.monotonic() - started, hung

    def scheduling(self) -> dict[str, dict]:
        return json.loads(self.figures_path.read_text()) if self.figures_path.exists() else {}


def _scraped_delays(text: str, interval: float) -> tuple[float, float, float]:
    """From ``/metrics``' ``driftloop_fleet_check_delay_seconds``, over every model: (checks counted,
    the largest bucket bound not above ``interval``, checks later than that bound)."""
    total, buckets = 0.0, dict[float, float]()
    for line in text.splitlines():
        if line.startswith("driftloop_fleet_check_delay_seconds_count"):
            total += float(line.rsplit(" ", 1)[1])
        elif line.startswith("driftloop_fleet_check_delay_seconds_bucket"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            if le != "+Inf":
                buckets[float(le)] = buckets.get(float(le), 0.0) + float(line.rsplit(" ", 1)[1])
    bound = max((b for b in buckets if b <= interval), default=0.0)
    return total, bound, total - buckets.get(bound, 0.0)


def _check_spans(store_db: Path) -> list[tuple[float, float]]:
    """(start, seconds) of every check of the run."""
    import sqlite3
    with sqlite3.connect(store_db) as conn:
        return [(t, d or 0.0) for t, d in conn.execute("SELECT ts, duration_seconds FROM check_results")]


def _checks(store_db: Path, since: float) -> list[tuple[str, str, float]]:
    import sqlite3
    with sqlite3.connect(store_db) as conn:
        return conn.execute("SELECT model, status, duration_seconds FROM check_results WHERE ts >= ? "
                            "ORDER BY id", (since,)).fetchall()


# ---- one fleet size -----------------------------------------------------------------------------
@dataclass
class Figures:
    models: int
    startup_s: float = 0.0
    rss_idle: int = 0
    idle_cpu: float = 0.0         # share of one core the daemon used while idle (no traffic, no check due)
    rss_busy: int = 0
    ingest_rate: float = 0.0      # median rows/s of the passes no check overlapped (of all when none)
    ingest_clean: int = 0
    ingest_range: tuple[float, float] = (0.0, 0.0)
    ingest_cpu_ms: float = 0.0    # the daemon's CPU milliseconds per 1,000 rows ingested (median of the passes)
    ingest_retried: int = 0       # 503 answers (store lock held past store.request_wait_seconds), retried
    ingest_p50: float = 0.0
    ingest_p95: float = 0.0
    check_p50: float = 0.0
    check_p95: float = 0.0
    cpu_per_check: float = 0.0
    delays: list[float] = field(default_factory=list)
    late: int = 0                 # checks that started more than one interval after they were due
    skipped: int = 0              # due checks APScheduler skipped: the model's previous one still ran or waited
    scraped: tuple[float, float, float] = (0.0, 0.0, 0.0)
    stop_s: float = 0.0
    stop_hung: bool = False
    errors: list[str] = field(default_factory=list)


def _ok_checks(server: Server, store_db: Path, since: float) -> dict[str, int]:
    done: dict[str, int] = {}
    for model, status, _ in _checks(store_db, since):
        if status == "ok":
            done[model] = done.get(model, 0) + 1
    return done


def run_fleet(n: int, workdir: Path, tracking_uri: str, args: argparse.Namespace) -> Figures:
    names = model_names(n)
    home = workdir / f"fleet-{n}"
    home.mkdir()
    port = _free_port()
    config = write_config(home / "driftloop.yaml", home, tracking_uri, port, names, args)
    store_db = home / "driftloop.db"
    per_pass = args.rows // args.passes
    passes = [traffic(config, names, per_pass, args.batch, seed=100 + 10 * n + k, prefix=f"p{k}-")
              for k in range(args.passes)]
    warmup, _ = traffic(config, names, 10 * n, 10, seed=99, prefix="w")  # one request per model, untimed
    fig = Figures(n)
    started = time.monotonic()
    server = Server(config, port, home)
    labelled_at = None
    timed: list[tuple[float, float, float]] = []  # (start, end, rows/s) of each pass
    ingest_cpu: list[tuple[float, float, float]] = []  # (start, end, server CPU seconds per 1,000 rows)
    try:
        server.wait(lambda: (lambda ms: len(ms) == n and all(m.get("state") == "running" and m.get("last_check")
                                                             for m in ms))(server.listing()),
                    timeout=120 + 3 * n, what="every model running with a first check")
        fig.startup_s = time.monotonic() - started
        time.sleep(args.idle)  # settle: the first checks' follow-ups (heap freezing, lazy imports) finish
        cpu_idle = _cpu_seconds(server.proc.pid)
        time.sleep(args.idle)
        fig.idle_cpu = (_cpu_seconds(server.proc.pid) - cpu_idle) / args.idle
        fig.rss_idle = _rss(server.proc.pid)
        print(f"  {n} models: up in {fig.startup_s:.1f} s, idle RSS {fig.rss_idle / MiB:.0f} MiB; "
              f"ingesting {args.passes} x {per_pass:,} rows ...", flush=True)
        post_all(port, "predictions", warmup, args.senders)
        latencies: list[float] = []
        for predictions, _ in passes:
            start, cpu_start = time.time(), _cpu_seconds(server.proc.pid)
            wall, lat, retried = post_all(port, "predictions", predictions, args.senders)
            timed.append((start, start + wall, per_pass / wall))
            ingest_cpu.append((start, start + wall, (_cpu_seconds(server.proc.pid) - cpu_start) / per_pass * 1000))
            latencies += lat
            fig.ingest_retried += retried
        fig.ingest_p50, fig.ingest_p95 = statistics.median(latencies), _pct(latencies, .95)
        for _, labels in passes:
            post_all(port, "labels", labels, args.senders)
        labelled_at = time.time()
        cpu0 = _cpu_seconds(server.proc.pid)
        print(f"  {n} models: {statistics.median(r for *_, r in timed):,.0f} rows/s; waiting for {args.rounds} "
              "check(s) per model ...",
              flush=True)
        server.wait(lambda: (lambda done: len(done) == n and min(done.values()) >= args.rounds)(
                        _ok_checks(server, store_db, labelled_at)),
                    timeout=(args.rounds + 2) * args.interval + 30 * n, what=f"{args.rounds} checks per model")
        cpu = _cpu_seconds(server.proc.pid) - cpu0
        checked = sum(_ok_checks(server, store_db, labelled_at).values())
        fig.cpu_per_check = cpu / max(1, checked)
        time.sleep(1.0)
        fig.rss_busy = _rss(server.proc.pid)
        # A scrape is answered from the last collection that finished within 0.5 s: the first one
        # after start-up may be empty while the collection of many models runs.
        fig.scraped = server.wait(lambda: (lambda d: d if d[0] else None)(
            _scraped_delays(server.get("/metrics"), args.interval)), timeout=30, what="the fleet's /metrics")
    finally:
        fig.stop_s, fig.stop_hung = server.stop()
    rows = _checks(store_db, labelled_at) if labelled_at is not None else []
    # A pass that overlapped a check (any model's) measured the check too: the rate is the clean passes'.
    spans = _check_spans(store_db)
    def clean(passes: list[tuple[float, float, float]]) -> list[float]:
        kept = [v for a, b, v in passes if not any(t < b and t + d > a for t, d in spans)]
        return kept or [v for *_, v in passes]
    fig.ingest_clean = len([1 for a, b, _ in timed if not any(t < b and t + d > a for t, d in spans)])
    if timed:
        rates = clean(timed)
        fig.ingest_rate, fig.ingest_range = statistics.median(rates), (min(rates), max(rates))
        fig.ingest_cpu_ms = statistics.median(clean(ingest_cpu)) * 1000
    durations = [d for _, status, d in rows if status == "ok" and d is not None]
    fig.check_p50, fig.check_p95 = statistics.median(durations), _pct(durations, .95)
    scheduling = server.scheduling()
    fig.delays = [d for values in scheduling.get("delays", {}).values() for d in values]
    fig.skipped = sum(scheduling.get("skipped", {}).values())
    fig.late = sum(1 for d in fig.delays if d > args.interval)
    fig.errors = [f"check of {m}: {s}" for m, s, _ in rows if s != "ok"][:5]
    if not fig.delays:
        fig.errors.append("no check delay recorded (fleet.jobs.delays changed shape?)")
    if fig.stop_hung:
        fig.errors.append(f"SIGTERM did not stop the daemon within 30 s: killed; threads' stacks in {server.log_path}")
    elif "Traceback" in server.log_path.read_text(errors="replace"):
        fig.errors.append(f"traceback in {server.log_path}")
    return fig


# ---- report -------------------------------------------------------------------------------------
def report(figs: list[Figures], args: argparse.Namespace) -> None:
    base = figs[0]

    def ratio(value: float, of: float) -> str:
        return f"x{value / of:.2f}" if of else "-"

    def per_model(f: Figures, rss: str) -> str:
        extra = f.models - base.models
        return f"{(getattr(f, rss) - getattr(base, rss)) / extra / MiB:.1f}" if extra else "base"

    columns: list[tuple[str, Any]] = [
        ("models", lambda f: f"{f.models}"),
        ("up s", lambda f: f"{f.startup_s:.1f}"),
        ("RSS idle", lambda f: f"{f.rss_idle / MiB:.0f} MiB"),
        ("/model", lambda f: per_model(f, "rss_idle")),
        ("idle CPU", lambda f: f"{f.idle_cpu * 100:.1f}%"),
        ("RSS busy", lambda f: f"{f.rss_busy / MiB:.0f} MiB"),
        ("/model", lambda f: per_model(f, "rss_busy")),
        ("rows/s", lambda f: f"{f.ingest_rate:,.0f}"),
        ("ratio", lambda f: ratio(f.ingest_rate, base.ingest_rate)),
        ("min-max", lambda f: f"{f.ingest_range[0] / 1000:.0f}k-{f.ingest_range[1] / 1000:.0f}k"),
        ("clean", lambda f: f"{f.ingest_clean}/{args.passes}"),
        ("CPU ms/1k", lambda f: f"{f.ingest_cpu_ms:.0f}"),
        ("ratio", lambda f: ratio(f.ingest_cpu_ms, base.ingest_cpu_ms)),
        ("p95 ms", lambda f: f"{f.ingest_p95 * 1000:.0f}"),
        ("503", lambda f: f"{f.ingest_retried}"),
        ("check s", lambda f: f"{f.check_p50:.3f}"),
        ("p95", lambda f: f"{f.check_p95:.2f}"),
        ("ratio", lambda f: ratio(f.check_p50, base.check_p50)),
        ("CPU s", lambda f: f"{f.cpu_per_check:.2f}"),
        ("delay s", lambda f: f"{statistics.median(f.delays):.2f}" if f.delays else "-"),
        ("p95", lambda f: f"{_pct(f.delays, .95):.2f}"),
        ("max", lambda f: f"{max(f.delays, default=float('nan')):.2f}"),
        (">intvl", lambda f: f"{f.late}/{len(f.delays)}"),
        ("skip", lambda f: f"{f.skipped}"),
        ("stop s", lambda f: f"{f.stop_s:.1f}{' hung' if f.stop_hung else ''}"),
    ]
    cells = [[cell(f) for _, cell in columns] for f in figs]
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, (h, _) in enumerate(columns)]
    print(f"\nOne daemon process; {args.workers} check workers; every model checked every {args.interval:g} s "
          f"over {args.window} rows; {args.rows:,} predictions in all per size over {args.senders} senders, "
          f"batches of {args.batch}; load average now {os.getloadavg()[0]:.1f}")
    print("  ".join(h.rjust(w) for (h, _), w in zip(columns, widths)))
    for row in cells:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
    notes = [
        "/model: (RSS - RSS of the first size) / extra models, MiB; RSS idle: after start-up and a first (empty) "
        "check; busy: after the traffic and the checks; idle CPU: of one core, over --idle seconds after --idle "
        "seconds to settle",
        "rows/s: median (and range) of the ingest passes no check overlapped (clean; of all passes when none "
        "was); CPU ms/1k: the daemon's CPU milliseconds per 1,000 rows, same passes (a loaded machine moves it "
        "far less than the rates); p95 ms: per request; 503: answers retried",
        "check s: a check's own duration (median, p95); CPU s: the daemon's CPU seconds per check",
        "delay s: how late a check started past its due time, every check of the run (fleet.jobs.delays); "
        ">intvl: later than one interval; skip: due checks not run because the model's previous one still ran "
        "or waited",
        "/metrics' histogram: " + "; ".join(f"{f.models} models {f.scraped[2]:.0f} of {f.scraped[0]:.0f} later "
                                            f"than {f.scraped[1]:g} s" for f in figs),
    ]
    print("\n".join(notes))
    for f in figs:
        for error in f.errors:
            print(f"  {f.models} models: {error}")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "_serve":
        serve_role(sys.argv[2], sys.argv[3])
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="1 and 10 models, 20 s interval, one check per model "
                   "after the traffic, fewer rows (smoke run)")
    p.add_argument("--models", default=None, help="fleet sizes, comma-separated; the first is the baseline "
                   "[1,10,50; --quick 1,10]")
    p.add_argument("--interval", type=float, default=None, help="seconds between a model's checks [60; --quick 20]")
    p.add_argument("--rounds", type=int, default=None, help="checks per model after the labels arrived [2; --quick 1]")
    p.add_argument("--window", type=int, default=2000, help="rows in each check's window")
    p.add_argument("--rows", type=int, default=None, help="predictions in all, per fleet size [100000; --quick 20000]")
    p.add_argument("--passes", type=int, default=4, help="timed ingest passes (--rows / passes rows each)")
    p.add_argument("--batch", type=int, default=500, help="records per request")
    p.add_argument("--senders", type=int, default=4, help="concurrent keep-alive connections")
    p.add_argument("--workers", type=int, default=2, help="fleet.check_workers")
    p.add_argument("--idle", type=float, default=5.0, help="seconds to settle after start-up, then seconds "
                   "over which the idle CPU is measured, before the first RSS reading")
    p.add_argument("--train-rows", type=int, default=3000)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--keep", type=Path, default=None, help="keep the homes in this folder")
    args = p.parse_args()
    sizes = [int(s) for s in (args.models or ("1,10" if args.quick else "1,10,50")).split(",")]
    args.interval = args.interval or (20.0 if args.quick else 60.0)
    args.rounds = args.rounds or (1 if args.quick else 2)
    args.rows = args.rows or (20_000 if args.quick else 100_000)
    if args.rows // max(sizes) < args.window:
        print(f"note: {args.rows // max(sizes)} rows per model at {max(sizes)} models, fewer than the "
              f"{args.window}-row window", file=sys.stderr)

    import logging
    logging.basicConfig(level=logging.ERROR)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    tmp = tempfile.TemporaryDirectory(prefix="bench-fleet-")
    workdir = Path(args.keep or tmp.name)
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        shared = workdir / "registry"
        shared.mkdir()
        tracking_uri = f"sqlite:///{shared / 'mlflow.db'}"
        t0 = time.monotonic()
        print(f"training one champion and registering it for {max(sizes)} models (setup, not timed) ...",
              flush=True)
        train_shared_champion(write_config(shared / "driftloop.yaml", shared, tracking_uri, _free_port(),
                                           model_names(max(sizes)), args), args)
        print(f"  done in {time.monotonic() - t0:.0f} s", flush=True)
        figs = [run_fleet(n, workdir, tracking_uri, args) for n in sizes]
        report(figs, args)
        return 1 if any(f.errors for f in figs) else 0
    finally:
        tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
