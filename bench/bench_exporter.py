#!/usr/bin/env python3
"""How much a scrape of the GPU exporter costs, and how much of that is our own code.

For 1, 8 and 64 GPUs it times, per scrape (median and p99 wall time, and CPU time of the whole
process, worker threads included):

* ``prebuilt``  the collector over a zero-cost backend that returns pre-built readings: everything
                measured is our own code (lanes, deadline, families);
* ``simulated`` the collector over the simulated backend (what ``--simulate N`` serves);
* ``nvml``      with ``--nvml``, the collector over real NVML on this machine's GPUs.

Against baselines measured in the same run:

* ``backend``   the same backend's readings taken in a plain loop, no collector: the cost that is
                NVML's (or the simulator's), so ``ours = collect - backend``;
* ``inline``    a textbook collector: reads each GPU in the scrape thread and builds
                ``GaugeMetricFamily`` objects with ``add_metric`` (no hang protection);
* ``nvidia-smi`` with ``--nvml`` and when installed, one ``nvidia-smi --query-gpu=... --format=csv``
                call, which is how nvidia_gpu_exporter reads GPUs.

    python bench/bench_exporter.py                 # 1, 8, 64 simulated GPUs
    python bench/bench_exporter.py --quick         # scaled down (CI smoke run)
    python bench/bench_exporter.py --nvml          # plus the real GPUs and nvidia-smi
    python bench/bench_exporter.py --nvml --load   # ... while a bf16 matmul loop keeps every GPU busy

Slow readings (energy, GPM activity, PCIe/NVLink throughput and counters) come from the background
sampler, which has taken two passes before timing starts, so every scrape serves them from its cache;
its own cost per pass is printed separately (it is not on the scrape path). The timed passes are
spaced past GPM's 0.1 s minimum window, so each one really samples GPM. With ``--nvml`` it also
prints what the last scrape served per GPU (utilization, GPM ``sm_active`` / ``tensor_active`` over the
sampler's last window, energy) and how many series: under ``--load`` sm_active should agree with
utilization (issue 38 read 0.097 against 0.95 when passes came milliseconds apart).
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prometheus_client import CollectorRegistry  # noqa: E402
from prometheus_client.exposition import choose_encoder  # noqa: E402
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily  # noqa: E402

from monitor.gpu import GpuCollector, GpuSession, SlowSampler  # noqa: E402
from monitor.gpu.backend import GpuBackend, GpuIdentity, GpuSample, SlowSample  # noqa: E402
from monitor.gpu.families import COUNTERS, GAUGES  # noqa: E402
from monitor.gpu.exposition import Encoder  # noqa: E402
from monitor.gpu.fake import default_sample, default_slow  # noqa: E402
from monitor.gpu.gpm import MIN_WINDOW_SECONDS  # noqa: E402
from monitor.gpu.simulated import SimulatedBackend  # noqa: E402

SMI_QUERY = ("index,uuid,name,driver_version,pci.bus_id,utilization.gpu,utilization.memory,memory.used,memory.free,"
             "memory.total,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,fan.speed,pstate,"
             "clocks_event_reasons.active,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total")


OPENMETRICS = "application/openmetrics-text; version=1.0.0"


class Frozen:
    def __init__(self, families):
        self.families = families

    def collect(self):
        return self.families


class PrebuiltBackend(SimulatedBackend):
    """Returns the same pre-built reading for every GPU: a backend that costs nothing."""

    def __init__(self, count: int):
        super().__init__(count)
        self._samples = [default_sample(i % 4) for i in range(count)]
        self._slow = [default_slow(i % 4) for i in range(count)]

    def sample(self, index: int, *, processes: bool = False) -> GpuSample:
        return self._samples[index]

    def slow_sample(self, index: int, *, pcie_throughput: bool = False) -> SlowSample:
        return self._slow[index]


class InlineCollector:
    """The textbook way: read every GPU in the scrape thread, ``add_metric`` per value."""

    def __init__(self, backend: GpuBackend, gpus: list[GpuIdentity]):
        self.backend, self.gpus = backend, gpus

    def collect(self):
        readings = [(g, self.backend.sample(g.index)) for g in self.gpus]
        for attr, name, help_ in GAUGES:
            m = GaugeMetricFamily(name, help_, labels=["gpu", "uuid"])
            for g, s in readings:
                if getattr(s, attr) is not None:
                    m.add_metric([str(g.index), g.uuid], getattr(s, attr))
            yield m
        for attr, name, help_ in COUNTERS:
            m = CounterMetricFamily(name, help_, labels=["gpu", "uuid"])
            for g, s in readings:
                if getattr(s, attr) is not None:
                    m.add_metric([str(g.index), g.uuid], getattr(s, attr))
            yield m


def timed(fn: Callable[[], object], iterations: int, warmup: int) -> tuple[list[float], float]:
    """Wall seconds of each call, and process CPU seconds per call (all threads)."""
    for _ in range(warmup):
        fn()
    walls = []
    cpu0 = time.process_time()
    for _ in range(iterations):
        t0 = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
    return walls, (time.process_time() - cpu0) / iterations


def p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def measure(label: str, backend: GpuBackend, iterations: int, warmup: int,
            processes: bool = False) -> dict[str, Any]:
    session = GpuSession(backend)
    sampler = SlowSampler(backend, session, interval_seconds=3600.0)
    collector = GpuCollector(session, call_timeout_seconds=10.0, process_metrics=processes, sampler=sampler,
                             hostname="bench-node")
    list(collector.collect())  # initialise and identify the GPUs
    sampler.sample_once()
    sampled = spaced(sampler.sample_once, max(5, iterations // 100))  # GPM has its two samples after the first
    n = len(session.gpus)
    registry = CollectorRegistry()
    registry.register(collector)
    gpus = list(session.gpus.values())
    inline = InlineCollector(backend, gpus)

    def backend_only() -> None:
        for g in gpus:
            backend.sample(g.index, processes=processes)

    collect_walls, collect_cpu = timed(lambda: list(collector.collect()), iterations, warmup)
    backend_walls, _ = timed(backend_only, iterations, warmup)
    inline_walls, _ = timed(lambda: list(inline.collect()), iterations, warmup)
    # Exposition of one fixed scrape: our writer against prometheus_client's, text and OpenMetrics.
    frozen = Frozen(list(collector.collect()))
    encoder = Encoder()
    expo = {}
    for fmt, accept in (("text", ""), ("openmetrics", "application/openmetrics-text; version=1.0.0")):
        library = choose_encoder(accept)[0]
        expo[fmt] = (statistics.median(timed(lambda: library(frozen), max(10, iterations // 4), warmup)[0]),
                     statistics.median(timed(lambda: encoder.encode(frozen, accept), max(10, iterations // 4),
                                             warmup)[0]))
    full_walls, full_cpu = timed(lambda: encoder.encode(registry, OPENMETRICS), iterations, warmup)
    size = len(encoder.encode(registry)[0])
    served = served_values(collector.collect())
    session.lanes.close()
    backend.shutdown()
    med = statistics.median
    return {
        "label": label, "gpus": n, "collect_p50": med(collect_walls), "collect_p99": p(collect_walls, 0.99),
        "cpu": collect_cpu, "backend_p50": med(backend_walls), "ours_p50": med(collect_walls) - med(backend_walls),
        "inline_p50": med(inline_walls), "bytes": size, "expo": expo, "full_p50": med(full_walls),
        "full_p99": p(full_walls, 0.99), "full_cpu": full_cpu, "sampler_p50": med(sampled), "served": served,
    }


def spaced(fn: Callable[[], object], calls: int) -> list[float]:
    """Wall seconds of each call of a slow reading, calls spaced past GPM's minimum window (a call
    sooner than that takes no GPM sample, so back-to-back calls would time less than the sampler does)."""
    walls = []
    for _ in range(calls):
        time.sleep(MIN_WINDOW_SECONDS * 1.5)
        t0 = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
    return walls


SERVED = ("driftloop_gpu_utilization_ratio", "driftloop_gpu_sm_active_ratio", "driftloop_gpu_tensor_active_ratio",
          "driftloop_gpu_energy_joules_total", "driftloop_gpu_background_sample_age_seconds")


def served_values(families) -> dict[str, object]:
    """What one scrape served: the SERVED values by GPU (whole GPUs only), and how many GPU series."""
    by_gpu: dict[str, dict[str, float]] = {}
    series = 0
    for family in families:
        for sample in family.samples:
            gpu = sample.labels.get("gpu")
            if gpu is None:
                continue
            series += 1
            if sample.name in SERVED and "gpu_instance" not in sample.labels:
                by_gpu.setdefault(gpu, {})[sample.name] = sample.value
    return {"series": series, "gpus": by_gpu}


def nvml_fields(iterations: int) -> list[tuple[str, float]]:
    """Median cost of each NVML reading on GPU 0: where a scrape's time goes."""
    from monitor.gpu.nvml import NvmlBackend
    from monitor.gpu.backend import GpuSample
    b = NvmlBackend()
    b.init()
    h = b._handle(0)
    out = []
    for field, read in b._readers:
        try:
            read(h, GpuSample())
        except b._nv.NVMLError as exc:
            out.append((f"{field} ({exc})", float("nan")))
            continue
        out.append((field, statistics.median(timed(lambda: read(h, GpuSample()), iterations, 5)[0])))
    out.append(("processes (compute + graphics + names)",
                statistics.median(timed(lambda: b._processes(h), iterations, 5)[0])))
    out.append(("pcie_throughput, legacy counter (background only)",
                statistics.median(timed(lambda: b.pcie_throughput(0), 5, 1)[0])))
    b.slow_sample(0)
    out.append(("slow_sample: energy, GPM, NVLink, remapped rows, MIG (background only)",
                statistics.median(spaced(lambda: b.slow_sample(0), 10))))
    b.shutdown()
    return out


def nvidia_smi(iterations: int) -> float | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    cmd = [smi, f"--query-gpu={SMI_QUERY}", "--format=csv,noheader,nounits"]
    if subprocess.run(cmd, capture_output=True).returncode != 0:
        cmd = [smi, "--query-gpu=index,uuid,utilization.gpu,memory.used,temperature.gpu,power.draw",
               "--format=csv,noheader,nounits"]
    walls, _ = timed(lambda: subprocess.run(cmd, capture_output=True, check=True), iterations, 2)
    return statistics.median(walls)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", default="1,8,64", help="simulated GPU counts [%(default)s]")
    ap.add_argument("--iterations", type=int, default=2000, help="scrapes per measurement [%(default)s]")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--quick", action="store_true", help="scale down: 200 iterations")
    ap.add_argument("--nvml", action="store_true", help="also measure real NVML and nvidia-smi")
    ap.add_argument("--load", action="store_true", help="with --nvml: keep every GPU busy with bf16 matmuls (torch)")
    args = ap.parse_args(argv)
    iterations = 200 if args.quick else args.iterations
    if args.nvml:
        from monitor.gpu.backend import NvmlUnavailableError
        from monitor.gpu.nvml import NvmlBackend
        probe = NvmlBackend()
        try:
            probe.init()
        except NvmlUnavailableError as exc:
            print(f"Error: --nvml needs an NVIDIA GPU and driver: {exc}", file=sys.stderr)
            return 2
        probe.shutdown()
    load = start_load() if args.nvml and args.load else None
    try:
        return report(args, iterations)
    finally:
        if load is not None:
            load.kill()
            load.wait()


LOAD = """
import sys, torch
xs = [(torch.randn(8192, 8192, device=f"cuda:{d}", dtype=torch.bfloat16),) * 2
      for d in range(torch.cuda.device_count())]
print("busy", flush=True)
while True:
    for a, b in xs:
        for _ in range(10):
            a @ b
"""


def start_load() -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", LOAD], stdout=subprocess.PIPE, text=True)
    if proc.stdout.readline().strip() != "busy":
        raise SystemExit("Error: the matmul load did not start (torch with CUDA needed)")
    time.sleep(2.0)
    return proc


def report(args: argparse.Namespace, iterations: int) -> int:
    rows = []
    for n in (int(x) for x in args.gpus.split(",")):
        rows.append(measure("prebuilt", PrebuiltBackend(n), iterations, args.warmup))
        rows.append(measure("simulated", SimulatedBackend(n), iterations, args.warmup))
    smi = None
    if args.nvml:
        from monitor.gpu.nvml import NvmlBackend
        rows.append(measure("nvml", NvmlBackend(), max(50, iterations // 4), 10))
        rows.append(measure("nvml+processes", NvmlBackend(), max(50, iterations // 4), 10, processes=True))
        fields = nvml_fields(200)
        smi = nvidia_smi(20 if args.quick else 50)

    ms = 1e3
    print(f"GPU exporter, per scrape, {iterations} scrapes each; milliseconds; CPU counts the whole process")
    print("\nCollection (collector.collect()):")
    head = ("backend", "GPUs", "collect p50", "collect p99", "CPU/scrape", "backend p50", "ours p50",
            "inline p50", "collect/inline")
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rows:
        print(f"| {r['label']} | {r['gpus']} | {r['collect_p50'] * ms:.3f} | {r['collect_p99'] * ms:.3f} | "
              f"{r['cpu'] * ms:.3f} | {r['backend_p50'] * ms:.3f} | {r['ours_p50'] * ms:.3f} | "
              f"{r['inline_p50'] * ms:.3f} | {r['collect_p50'] / r['inline_p50']:.2f} |")
    print("\nExposition of one scrape (formatting only): prometheus_client vs ours")
    head = ("backend", "GPUs", "bytes", "text: lib p50", "text: ours p50", "speed-up", "OpenMetrics: lib p50",
            "OpenMetrics: ours p50", "speed-up")
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rows:
        (tl, to), (ol, oo) = r["expo"]["text"], r["expo"]["openmetrics"]
        print(f"| {r['label']} | {r['gpus']} | {r['bytes']} | {tl * ms:.3f} | {to * ms:.3f} | {tl / to:.1f}x | "
              f"{ol * ms:.3f} | {oo * ms:.3f} | {ol / oo:.1f}x |")
    print("\nWhole scrape body (collect + OpenMetrics, as Prometheus asks); the background sampler's pass:")
    head = ("backend", "GPUs", "p50", "p99", "CPU/scrape", "sampler pass p50 (off the scrape path)")
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rows:
        print(f"| {r['label']} | {r['gpus']} | {r['full_p50'] * ms:.3f} | {r['full_p99'] * ms:.3f} | "
              f"{r['full_cpu'] * ms:.3f} | {r['sampler_p50'] * ms:.3f} |")
    eight = [r for r in rows if r["label"] == "prebuilt" and r["gpus"] == 8]
    if eight:
        verdict = "meets" if eight[0]["ours_p50"] < 1e-3 else "MISSES"
        print(f"\nour own code for an 8-GPU scrape: {eight[0]['ours_p50'] * ms:.3f} ms ({verdict} the < 1 ms goal)")
    if args.nvml:
        print("\nNVML cost per reading, GPU 0 (median ms):")
        print("| reading | ms |\n|---|---|")
        for field, t in fields:
            print(f"| {field} | {t * ms:.4f} |")
        nv = [r for r in rows if r["label"] == "nvml"][0]
        print(f"\nServed by the last NVML scrape{' under the matmul load' if args.load else ''}: "
              f"{nv['served']['series']} GPU series")
        print("| GPU | utilization | sm_active | tensor_active | energy J | slow reading age s |\n" + "|---" * 6 + "|")
        for gpu, v in sorted(nv["served"]["gpus"].items()):
            cells = [v.get(name) for name in SERVED]
            print(f"| {gpu} | " + " | ".join("absent" if c is None else f"{c:.3f}" for c in cells) + " |")
        if smi is None:
            print("nvidia-smi: not installed")
        else:
            print(f"nvidia-smi --query-gpu (CSV), {nv['gpus']} GPU(s): {smi * ms:.2f} ms per call; "
                  f"exporter collect over NVML {nv['collect_p50'] * ms:.2f} ms; "
                  f"ratio nvidia-smi/exporter = {smi / nv['collect_p50']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
