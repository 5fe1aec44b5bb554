"""Benchmark: the daemon's own costs, each against a baseline measured in the same run.

    .venv/bin/python bench/bench_daemon.py                      # everything (about 2 minutes on 2 cores)
    .venv/bin/python bench/bench_daemon.py --history 2000 --requests 100 --no-retrain   # scaled down

1. ``/metrics`` scrape of the daemon's collector (counters derived from the store with
   ``count(*) ... GROUP BY``) with an empty store and with ``--history`` check rows, incidents
   and retrain attempts; baseline: the store's ``row_counts()`` (two ``count(*)`` on a small table).
2. ``POST /v1/alerts`` over HTTP (an Alertmanager payload attached to the open incident, retrain
   deferred by the cooldown); baseline: ``GET /healthz`` on the same server. Then bodies of 1 MiB or
   more (a 5 MiB label and a 2 MiB categorical value refused with 422, 6,000 records stored), with
   the heap of a daemon after its first check, not frozen and frozen as ``driftloop serve`` freezes
   it; baseline: ``json.loads`` of the same body.
3. One scheduled check end to end (store window of ``--window`` rows, evaluation, Evidently
   report saved, row recorded, policy); baseline: the evaluation alone (``DriftEvaluator``, warm).
4. A retrain in the child process (``monitor.daemon.retraining.worker``) vs ``trainer.retrain`` in process,
   on the same window: the price of crash isolation. ``--no-retrain`` skips it.

Prints medians and p99 (ms or s) and the ratios.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def stats(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]


def timed(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def row(name: str, samples: list[float], base: list[float] | None = None, unit: str = "ms") -> None:
    scale = 1000.0 if unit == "ms" else 1.0
    med, p99 = stats(samples)
    ratio = f"  x{med / stats(base)[0]:.2f} vs baseline" if base else ""
    print(f"  {name:<44} median {med * scale:9.2f} {unit}  p99 {p99 * scale:9.2f} {unit}{ratio}")


def fill_history(daemon, n: int) -> None:
    """``n`` check rows, ``n // 10`` resolved incidents with one attempt each."""
    from sqlalchemy import insert

    from monitor.daemon.state.tables import check_results, incident_events, incidents, retrain_attempts
    from monitor.store import write_transaction

    now, model = time.time(), daemon.cfg.model.name
    with write_transaction(daemon.store.engine) as conn:
        conn.execute(insert(check_results), [
            {"model": model, "ts": now - i, "status": "error" if i % 50 == 0 else "ok", "window_rows": 5000,
             "labelled_rows": 2000, "accuracy": 0.86, "roc_auc": 0.93} for i in range(n)])
        k = n // 10
        conn.execute(insert(incidents), [
            {"id": f"inc-b{i}", "model": model, "reason": ("accuracy", "drift", "manual")[i % 3], "trigger": "alert",
             "state": "resolved", "opened_at": now - i, "updated_at": now - i, "resolved_at": now - i,
             "retrain": True, "attempts": 1} for i in range(k)])
        conn.execute(insert(incident_events), [
            {"incident_id": f"inc-b{i}", "ts": now - i, "kind": "opened", "message": "bench"} for i in range(k)])
        conn.execute(insert(retrain_attempts), [
            {"id": f"att-b{i}", "model": model, "incident_id": f"inc-b{i}", "trigger": "alert",
             "status": ("promoted", "rejected", "failed")[i % 3], "started_at": now - i - 60, "finished_at": now - i,
             "duration_seconds": 60.0, "samples_per_second": 5000.0, "reasons": "[]"} for i in range(k)])


def bench_scrape(cfg, history: int, repeats: int) -> None:
    from monitor.daemon.runtime.daemon import Daemon
    from monitor.daemon.runtime.metrics import DaemonCollector

    daemon = Daemon(cfg, gpu=False)
    try:
        ours = DaemonCollector(daemon.controller, lambda: "1")
        print(f"/metrics collection (daemon collector), {repeats} scrapes each")
        base = timed(daemon.store.row_counts, repeats)
        row("baseline: store.row_counts() (2 count(*))", base)
        row("daemon collector, empty store", timed(lambda: list(ours.collect()), repeats), base)
        fill_history(daemon, history)
        row(f"daemon collector, {history} checks + {history // 10} incidents",
            timed(lambda: list(ours.collect()), repeats), base)
    finally:
        daemon.stop()


def bench_webhook(cfg, requests: int) -> None:
    import httpx

    from monitor.daemon.runtime.daemon import Daemon
    from monitor.daemon.runtime.serve import serve
    from tests.monitor.daemon.test_alertmanager import DOCS_PAYLOAD

    daemon = Daemon(cfg, gpu=False)
    inc = daemon.controller.incidents.open("alertmanager", "alert", "bench")
    att = daemon.controller.attempts.begin(inc.id, "alert")
    daemon.controller.attempts.finish(att.id, "rejected")  # just finished: the cooldown defers retrains
    stop, ready = threading.Event(), threading.Event()
    thread = threading.Thread(target=serve, args=(cfg, stop), kwargs={"daemon": daemon, "ready": ready,
                                                                       "scheduler": False}, daemon=True)
    thread.start()
    ready.wait(60)
    url = f"http://127.0.0.1:{cfg.server.port}"
    try:
        with httpx.Client(timeout=10) as client:
            client.get(url + "/healthz")
            print(f"HTTP, {requests} requests each, one keep-alive connection")
            base = timed(lambda: client.get(url + "/healthz").raise_for_status(), requests)
            row("baseline: GET /healthz", base)
            row("POST /v1/alerts (attach, cooldown)",
                timed(lambda: client.post(url + "/v1/alerts", json=DOCS_PAYLOAD).raise_for_status(), requests), base)
            bench_large_bodies(client, url, cfg.server.token, max(5, requests // 20))
    finally:
        stop.set()
        thread.join(60)


def bench_large_bodies(client, url: str, token: str | None, repeats: int) -> None:
    """Bodies of 1 MiB or more, each followed by a full garbage collection (monitor/ingest/memory.py):
    two refused with 422 naming the field (a 5 MiB Alertmanager label, a 2 MiB categorical value) and
    one stored (6,000 records), first with the check path imported as after a daemon's first check,
    then with that heap frozen as ``driftloop serve`` does (monitor/daemon/runtime/heap.py).
    Baseline: ``json.loads`` of the same body in this process, the least any server does with it."""
    import copy
    import gc
    import importlib
    import itertools
    import json

    from monitor.daemon.runtime.heap import WARM_MODULES, warm_and_freeze
    from tests.monitor.daemon.test_alertmanager import DOCS_PAYLOAD

    headers = {"content-type": "application/json"} | ({"authorization": f"Bearer {token}"} if token else {})
    alert = copy.deepcopy(DOCS_PAYLOAD)
    alert["alerts"][0]["labels"]["blob"] = "b" * (5 * 2**20)
    features = {**{f"x{i}": 0.123456 * i for i in range(8)}, "region": "north", "device": "ios"}
    huge = {"id": "p1", "score": 0.4, "features": {**features, "device": "d" * (2 * 2**20)}}
    batches = itertools.count()

    def batch() -> bytes:  # fresh ids each time: stored, not answered as duplicates
        n = next(batches)
        return json.dumps([{"id": f"big-{n}-{i}", "score": 0.4, "features": features}
                           for i in range(6000)]).encode()

    cases = (("POST /v1/alerts, a 5 MiB label (422)", "/v1/alerts", lambda: json.dumps(alert).encode(), 422),
             ("POST /v1/predictions, a 2 MiB value (422)", "/v1/predictions", lambda: json.dumps([huge]).encode(),
              422),
             ("POST /v1/predictions, 6,000 records (stored)", "/v1/predictions", batch, 200))

    def run(heap: str) -> None:
        print(f"Bodies of 1 MiB or more, {repeats} requests each, {heap}: "
              f"{len(gc.get_objects()):,} objects tracked, {gc.get_freeze_count():,} frozen")
        for name, path, make, status in cases:
            bodies = [make() for _ in range(repeats)]
            sent = iter(bodies)

            def post(name: str = name, path: str = path, status: int = status, sent: Any = sent) -> None:
                r = client.post(url + path, content=next(sent), headers=headers)
                assert r.status_code == status, (name, r.status_code, r.text[:300])
            base = timed(lambda body=bodies[0]: json.loads(body), repeats)
            row(f"baseline: json.loads ({len(bodies[0]) / 2**20:.1f} MiB)", base)
            row(name, timed(post, repeats), base)

    for module in WARM_MODULES:  # what a daemon holds after its first check
        importlib.import_module(module)
    gc.collect()
    run("check path imported, heap not frozen")
    warm_and_freeze()
    try:
        run("heap frozen (driftloop serve)")
    finally:
        gc.unfreeze()  # the check part below measures as before


def bench_check_and_retrain(cfg, window: int, repeats: int, retrain: bool) -> None:
    import numpy as np

    import trainer
    from monitor.daemon.runtime.daemon import Daemon
    from monitor.daemon.retraining.launcher import ProcessLauncher, RetrainJob
    from monitor.drift import DriftEvaluator
    from trainer.synthetic import make_dataset

    print("training a baseline model (setup, not timed) ...", flush=True)
    trainer.train_baseline(cfg, make_dataset(4000, seed=1))
    daemon = Daemon(cfg, gpu=False)
    try:
        df = make_dataset(window, seed=2, concept_shift=0.5)
        champion = trainer.load_champion(cfg)
        df["score"] = champion.predict_proba(df)
        df["id"] = [f"b{i}" for i in range(window)]
        df["ts"] = time.time() - window + np.arange(window)
        daemon.store.add_predictions(df.drop(columns=["label"]))
        daemon.store.add_labels(df[["id", "label", "ts"]])
        current = daemon.store.window(last_n=window)
        evaluator = DriftEvaluator()
        evaluate = lambda: evaluator(champion.baseline.reference, current, cfg.model, cfg.drift,  # noqa: E731
                                     champion.baseline.metrics)
        evaluate()
        daemon.run_check_now()  # warm both
        print(f"one check, window of {window} rows, {repeats} runs each")
        base = timed(evaluate, repeats)
        row("baseline: evaluation alone (warm)", base)
        row("daemon check end to end", timed(daemon.run_check_now, repeats), base)
        if not retrain:
            return
        labelled = daemon.store.window(last_n=window, labelled_only=True)
        print("one retrain on the same window (promotion disabled: both are rejected)")
        cfg_nopromote = cfg.model_copy(update={"training": cfg.training.model_copy(
            update={"gate": cfg.training.gate.model_copy(update={"min_accuracy_gain": 1.0})})})
        base = timed(lambda: trainer.retrain(cfg_nopromote, labelled, trigger="manual"), 1)
        row("baseline: trainer.retrain in process", base, unit="s")
        launcher = ProcessLauncher(cfg.home / "retrains")
        config = cfg_nopromote.model_dump(mode="json")

        def child() -> None:
            handle = launcher.launch(RetrainJob(f"att-bench{time.time_ns()}", "inc-bench", "manual", labelled, config))
            result = handle.wait()
            assert result.ok, result.error
        row("retrain in a child process (daemon)", timed(child, 1), base, unit="s")
    finally:
        daemon.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--history", type=int, default=20_000, help="check rows for the scrape test (incidents: 1/10)")
    p.add_argument("--repeats", type=int, default=200, help="scrapes per case")
    p.add_argument("--requests", type=int, default=300, help="HTTP requests per case")
    p.add_argument("--window", type=int, default=5000, help="rows in the checked window")
    p.add_argument("--check-repeats", type=int, default=5)
    p.add_argument("--no-retrain", action="store_true", help="skip the retrain comparison")
    p.add_argument("--only", choices=["scrape", "webhook", "check"], help="run one part only")
    args = p.parse_args()

    import logging
    logging.basicConfig(level=logging.ERROR)
    from monitor.config import load_config
    from tests.conftest import free_port

    with tempfile.TemporaryDirectory() as tmp:
        def cfg_in(name: str, **over):
            base = {"home": str(Path(tmp) / name), "server": {"gpu_metrics": False, "port": free_port()},
                    "alerts": {"cooldown_seconds": 3600},
                    "training": {"epochs": 5, "retrain_epochs": 3, "min_rows": 100}}
            return load_config(path=None, environ={}, overrides={**base, **over})
        if args.only in (None, "scrape"):
            bench_scrape(cfg_in("scrape"), args.history, args.repeats)
        if args.only in (None, "webhook"):
            bench_webhook(cfg_in("webhook"), args.requests)
        if args.only not in (None, "check"):
            return
        # Thresholds no window reaches: the timed checks must not start retrains of their own.
        bench_check_and_retrain(cfg_in("check", drift={"window_size": args.window, "min_labels": 100},
                                       alerts={"accuracy_drop": 1.0, "auc_drop": 1.0}),
                                args.window, args.check_repeats, not args.no_retrain)


if __name__ == "__main__":
    main()
