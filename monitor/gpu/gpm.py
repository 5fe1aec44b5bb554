"""NVML's GPU Performance Monitoring (GPM; Hopper and later): activity ratios between two samples.

GPM gives what dcgm-exporter reads through DCGM's profiling module (SM active, SM occupancy,
tensor-core and pipe activity, DRAM bandwidth, PCIe and NVLink rates) without DCGM. A metric is an
average between two samples, so each GPU (or MIG instance) keeps a pair of sample buffers: each read
takes a new sample into the older buffer and asks ``nvmlGpmMetricsGet`` for the averages since the
other one. The sampler's interval is therefore the averaging window, as dcgm-exporter's collect
interval is. Used by :mod:`monitor.gpu.nvml`, which passes in the ``pynvml`` module (no import here).
"""
from __future__ import annotations

import threading
from typing import Any, Callable

from monitor.gpu.backend import PcieThroughput

_MIB = 1024.0 * 1024.0
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


class GpmPairs:
    """Sample buffer pairs by (GPU index, GPU instance or -1), freed when a GPU is looked up anew."""

    def __init__(self, nvml: Any):
        self._nv = nvml
        self._pairs: dict[tuple[int, int], list[Any]] = {}  # [older, newer, newer holds data]
        self._lock = threading.Lock()

    def read(self, key: tuple[int, int], take: Callable[[Any], Any]) -> dict[str, float] | None:
        """Take a sample with ``take(buffer)``; the metrics since the previous one (base units), or None
        on the first sample."""
        nv = self._nv
        with self._lock:
            pair = self._pairs.get(key)
            if pair is None:
                pair = self._pairs[key] = [nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc(), False]
        older, newer, ready = pair
        take(older)
        pair[0], pair[1], pair[2] = newer, older, True
        if not ready:
            return None
        req = nv.c_nvmlGpmMetricsGet_t()
        req.version = 1  # NVML_GPM_METRICS_GET_VERSION
        req.numMetrics = len(_GPM_METRICS)
        req.sample1, req.sample2 = newer, older  # newer was taken first: the earlier sample
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
            for sample in pair[:2]:
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
