"""NVML's GPU Performance Monitoring (GPM; Hopper and later): activity ratios between two samples.

GPM gives what dcgm-exporter reads through DCGM's profiling module (SM active, SM occupancy,
tensor-core and pipe activity, DRAM bandwidth, PCIe and NVLink rates) without DCGM. A metric is an
average between two samples (``nvmlGpmSampleGet`` twice, then ``nvmlGpmMetricsGet`` over the pair),
so each GPU (or MIG instance) keeps its latest sample and a spare buffer: each read takes a new
sample into the spare and asks for the averages since the latest one. The ratios therefore cover
exactly the last sampling interval, as dcgm-exporter's collect interval does: a load that starts
now shows in full one interval later, and nothing older is averaged in.

NVML's counters behind GPM refresh about every 100 ms, and NVIDIA's reference says two samples must
be further apart than that; a window shorter than ``MIN_WINDOW_SECONDS`` reads near zero whatever the
GPU does (the 0.097 ``sm_active`` an H200 under a saturating matmul showed when its sampler passes
came milliseconds apart). So a read that comes sooner takes no sample and returns the last full
window's ratios. Used by :mod:`monitor.gpu.nvml`, which passes in the ``pynvml`` module (no import
here).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from monitor.gpu.backend import PcieThroughput

_MIB = 1024.0 * 1024.0
# NVML: "the interval between two nvmlGpmSampleGet() calls should be greater than 100ms due to the
# internal sample refresh rate".
MIN_WINDOW_SECONDS = 0.1
# GPM metric ids (nvml.h nvmlGpmMetricId_t) -> (what, scale to base units).
_GPM_METRICS: tuple[tuple[int, str, float], ...] = (
    (2, "sm_active", 0.01),        # NVML_GPM_METRIC_SM_UTIL, percent
    (3, "sm_occupancy", 0.01),     # NVML_GPM_METRIC_SM_OCCUPANCY
    (5, "tensor_active", 0.01),    # NVML_GPM_METRIC_ANY_TENSOR_UTIL
    (10, "dram_active", 0.01),     # NVML_GPM_METRIC_DRAM_BW_UTIL
    (11, "fp64_active", 0.01),     # NVML_GPM_METRIC_FP64_UTIL
    (12, "fp32_active", 0.01),     # NVML_GPM_METRIC_FP32_UTIL
    (13, "fp16_active", 0.01),     # NVML_GPM_METRIC_FP16_UTIL
    (20, "pcie_tx", _MIB),         # NVML_GPM_METRIC_PCIE_TX_PER_SEC, MiB/s
    (21, "pcie_rx", _MIB),         # NVML_GPM_METRIC_PCIE_RX_PER_SEC
    (60, "nvlink_rx", _MIB),       # NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC
    (61, "nvlink_tx", _MIB),       # NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC
)


@dataclass
class _Pair:
    """One GPU's (or instance's) latest sample, a spare buffer, and the last window's metrics."""
    latest: Any
    spare: Any
    taken_at: float | None = None  # when ``latest`` was taken; None before the first sample
    last: dict[str, float] | None = None  # metrics of the last full window
    lock: threading.Lock = field(default_factory=threading.Lock)


class GpmPairs:
    """Sample pairs by (GPU index, GPU instance or -1), freed when a GPU is looked up anew.
    ``clock`` is injected so tests can space samples without sleeping."""

    def __init__(self, nvml: Any, clock: Callable[[], float] = time.monotonic):
        self._nv = nvml
        self._clock = clock
        self._pairs: dict[tuple[int, int], _Pair] = {}
        self._lock = threading.Lock()

    def _pair(self, key: tuple[int, int]) -> _Pair:
        with self._lock:
            pair = self._pairs.get(key)
            if pair is None:
                nv = self._nv
                pair = self._pairs[key] = _Pair(nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc())
            return pair

    def read(self, key: tuple[int, int], take: Callable[[Any], Any]) -> dict[str, float] | None:
        """The metrics (base units) over the window that ends now, taking a sample with
        ``take(buffer)``; the last window's when the latest sample is under ``MIN_WINDOW_SECONDS``
        old; None until two samples are that far apart."""
        pair = self._pair(key)
        with pair.lock:  # the sampler and a caller of its own (a test, a bench) must not share buffers
            now = self._clock()
            if pair.taken_at is not None and now - pair.taken_at < MIN_WINDOW_SECONDS:
                return pair.last
            take(pair.spare)
            earlier = pair.latest if pair.taken_at is not None else None
            pair.latest, pair.spare, pair.taken_at, pair.last = pair.spare, pair.latest, now, None
            if earlier is not None:
                pair.last = self._metrics(earlier, pair.latest)
            return pair.last

    def pending(self, index: int) -> bool:
        """True while a pair of GPU ``index`` has its first sample and no window yet."""
        with self._lock:
            pairs = [p for k, p in self._pairs.items() if k[0] == index]
        return any(p.taken_at is not None and p.last is None for p in pairs)

    def _metrics(self, earlier: Any, later: Any) -> dict[str, float]:
        nv = self._nv
        req = nv.c_nvmlGpmMetricsGet_t()
        req.version = 1  # NVML_GPM_METRICS_GET_VERSION
        req.numMetrics = len(_GPM_METRICS)
        req.sample1, req.sample2 = earlier, later
        for i, (metric_id, _, _) in enumerate(_GPM_METRICS):
            req.metrics[i].metricId = metric_id
        nv.nvmlGpmMetricsGet(req)
        out: dict[str, float] = {}
        for i, (_, name, scale) in enumerate(_GPM_METRICS):
            m = req.metrics[i]
            if m.nvmlReturn == 0:  # a metric this GPU lacks (NVLink on a PCIe board) is left out
                out[name] = float(m.value) * scale
        return out

    def drop(self, index: int | None) -> None:
        """Free the buffers of GPU ``index`` (all GPUs when None)."""
        with self._lock:
            keys = [k for k in self._pairs if index is None or k[0] == index]
            pairs = [self._pairs.pop(k) for k in keys]
        free = getattr(self._nv, "nvmlGpmSampleFree", None)
        for pair in pairs:
            for sample in (pair.latest, pair.spare):
                try:
                    if free is not None:
                        free(sample)
                except self._nv.NVMLError:
                    pass


def activity(got: dict[str, float]) -> dict[str, float] | None:
    """The activity ratios (ACTIVITY_FIELDS names) among GPM's metrics."""
    return {k: v for k, v in got.items() if not k.startswith(("pcie_", "nvlink_"))} or None


def rates(got: dict[str, float], link: str) -> PcieThroughput | None:
    """``link`` ("pcie" or "nvlink") rx/tx bytes per second among GPM's metrics."""
    rx, tx = got.get(f"{link}_rx"), got.get(f"{link}_tx")
    return None if rx is None and tx is None else PcieThroughput(rx, tx)
