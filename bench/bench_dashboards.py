#!/usr/bin/env python3
"""What the GPU fleet dashboard and the alert rules cost Prometheus as the fleet grows.

For each fleet size it starts simulated GPU nodes (in this process, 8 GPUs per node by default,
each node its own exporter and scrape target, as `driftloop exporter` runs one per node), a real
Prometheus with our rules scraping them every second, waits ``--warmup`` seconds for history, and then:

* times every query of grafana/dashboards/gpu-fleet.json as Grafana sends it on a dashboard load
  (range query over the history, ~1000 points per panel; variables at "All"): median and p99 per
  query over ``--repeats`` rounds, and the whole dashboard load (all queries of one round in
  parallel, 6 at a time, as a browser does);
* against a baseline measured in the same run: the range query ``up`` over the same window, the
  cheapest query Prometheus answers (HTTP and query-engine overhead only);
* reads Prometheus' own evaluation time of each rule group (``/api/v1/rules``), averaged.

    .venv/bin/python bench/bench_dashboards.py                  # 8, 64, 256 GPUs
    .venv/bin/python bench/bench_dashboards.py --quick          # 8 and 64 GPUs, short warm-up
    .venv/bin/python bench/bench_dashboards.py --gpus 512 --per-node 8 --repeats 30
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from prometheus_client import CollectorRegistry  # noqa: E402

from monitor.config import ExporterConfig  # noqa: E402
from monitor.gpu import SimulatedBackend, build_gpu_collector  # noqa: E402
from monitor.gpu.server import ExporterServer  # noqa: E402
from tests.observability.live import query_range, start_like_ours  # noqa: E402
from tests.observability.promql import dashboard_queries, load_dashboards, render  # noqa: E402


def start_nodes(gpus: int, per_node: int) -> tuple[list[str], list]:
    targets, closers = [], []
    cfg = ExporterConfig(process_metrics=True, pcie_throughput=True, sampler_interval_seconds=1.0)
    for node in range(max(1, gpus // per_node)):
        collector, close = build_gpu_collector(cfg, backend=SimulatedBackend(per_node, seed=node))
        registry = CollectorRegistry()
        registry.register(collector)
        server = ExporterServer(registry, "127.0.0.1", 0).start()
        targets.append(f"127.0.0.1:{server.port}")
        closers += [server.close, close]
    return targets, closers


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def bench_size(gpus: int, per_node: int, warmup: float, repeats: int) -> dict:
    targets, closers = start_nodes(gpus, per_node)
    with tempfile.TemporaryDirectory() as tmp:
        prom = start_like_ours(Path(tmp), {"driftloop-gpu": targets})
        try:
            time.sleep(warmup)
            end = time.time()
            start = end - warmup + 2
            step = max(1.0, (end - start) / 1000)  # Grafana's ~1000 points per panel
            board = load_dashboards()["gpu-fleet.json"]
            values = {"instance": [".*"], "gpu": [".*"]}  # "All", as allValue sends it
            queries = [(q.where.split(" target ")[0], render(q.expr, values, rate_interval="4s", interval=f"{step:g}s",
                                                             range_=f"{int(end - start)}s"))
                       for q in dashboard_queries("gpu-fleet.json", board)]

            def timed(expr: str) -> float:
                t = time.perf_counter()
                result = query_range(prom, expr, start, end, step)
                elapsed = time.perf_counter() - t
                assert result or "xid" in expr, f"no data: {expr}"
                return elapsed

            per_query = {w: [] for w, _ in queries}
            baseline, loads, rule_ms = [], [], {}
            with ThreadPoolExecutor(6) as pool:
                for _ in range(repeats):
                    baseline.append(timed("up"))
                    t = time.perf_counter()
                    for (w, _), elapsed in zip(queries, pool.map(timed, [e for _, e in queries])):
                        per_query[w].append(elapsed)
                    loads.append(time.perf_counter() - t)
                    # The latest evaluation of each rule group (they run every second meanwhile).
                    for g in httpx.get(f"{prom.url}/api/v1/rules", timeout=10).json()["data"]["groups"]:
                        rule_ms.setdefault(g["name"], []).append(g["evaluationTime"] * 1000)
            series = int(prom.query("count({__name__=~'driftloop_gpu_.+'})")[0]["value"][1])
        finally:
            prom.stop()
            for close in closers:
                close()
    slowest = max(per_query, key=lambda w: statistics.median(per_query[w]))
    title = slowest.split(" ", 3)[-1]  # "gpu-fleet.json panel N 'Title'" -> "'Title'"
    return {"gpus": gpus, "nodes": len(targets), "series": series, "queries": len(queries),
            "load_median": statistics.median(loads), "load_p99": pct(loads, 0.99),
            "up_median": statistics.median(baseline), "up_p99": pct(baseline, 0.99),
            "slowest": title, "slowest_median": statistics.median(per_query[slowest]),
            "slowest_p99": pct(per_query[slowest], 0.99),
            "rules_ms": {name: statistics.median(v) for name, v in rule_ms.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", default="8,64,256", help="comma-separated fleet sizes")
    ap.add_argument("--per-node", type=int, default=8, help="GPUs per simulated node (exporter)")
    ap.add_argument("--warmup", type=float, default=30.0, help="seconds of history before querying")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="8 and 64 GPUs, 10 s warm-up, 5 repeats")
    args = ap.parse_args()
    if args.quick:
        args.gpus, args.warmup, args.repeats = "8,64", 10.0, 5
    rows = [bench_size(int(n), args.per_node, args.warmup, args.repeats) for n in args.gpus.split(",")]

    load1, _, _ = os.getloadavg()
    print(f"\nGPU fleet dashboard, range queries over {args.warmup:g} s of 1 s scrapes, {args.repeats} rounds "
          f"({os.cpu_count()} CPUs, load average {load1:.1f} at the end)\n")
    print("| GPUs | nodes | GPU series | queries | dashboard load median / p99 | `up` median / p99 "
          "| load / `up` | slowest query median / p99 | rule group eval median (ms) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for r in rows:
        rules = ", ".join(f"{k.removeprefix('driftloop-')} {v:.2f}" for k, v in r["rules_ms"].items())
        print(f"| {r['gpus']} | {r['nodes']} | {r['series']} | {r['queries']} "
              f"| {r['load_median'] * 1000:.0f} / {r['load_p99'] * 1000:.0f} ms "
              f"| {r['up_median'] * 1000:.1f} / {r['up_p99'] * 1000:.1f} ms "
              f"| {r['load_median'] / r['up_median']:.1f}x "
              f"| {r['slowest']}: {r['slowest_median'] * 1000:.1f} / {r['slowest_p99'] * 1000:.1f} ms | {rules} |")


if __name__ == "__main__":
    main()
