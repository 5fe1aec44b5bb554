"""The background sampler's readings of one GPU: energy, remapped rows, NVLink error counters, GPM
activity (:mod:`monitor.gpu.gpm`) and MIG instances. Each costs milliseconds or needs two samples
over time, so :meth:`monitor.gpu.nvml.NvmlBackend.slow_sample` runs them off the scrape.

As with :mod:`monitor.gpu.nvml_readers`, a reading raises the ``NVMLError`` it got (an
``AttributeError`` when this nvidia-ml-py lacks the function) and the backend decides what it means.
"""
from __future__ import annotations

from typing import Any, Callable

from monitor.gpu.backend import MigSample, RemappedRows, SlowSample
from monitor.gpu.gpm import GpmPairs, activity, rates
from monitor.gpu.nvml_codes import NOT_FOUND, code_of, text
from monitor.gpu.nvml_readers import FI_NVLINK_ERRORS, Call, field_values

SlowReader = Callable[[int, Any, SlowSample], None]


def build_slow_readers(nv: Any, call: Call, gpm: GpmPairs) -> tuple[tuple[str, SlowReader], ...]:
    """``(field, reader)`` pairs in sampling order; a reader takes (GPU index, handle, sample)."""

    def energy(index: int, h: Any, s: SlowSample) -> None:
        s.energy_joules = call(("nvmlDeviceGetTotalEnergyConsumption",), h) * 1e-3

    def remapped(index: int, h: Any, s: SlowSample) -> None:
        corr, unc, pending, failure = call(("nvmlDeviceGetRemappedRows",), h)
        s.remapped_rows = RemappedRows(float(corr), float(unc), bool(pending), bool(failure))

    def nvlink_errors(index: int, h: Any, s: SlowSample) -> None:
        values = field_values(nv, call, h, tuple(fid for _, fid in FI_NVLINK_ERRORS))
        s.nvlink_errors = {name: v for (name, _), v in zip(FI_NVLINK_ERRORS, values) if v is not None}

    def gpm_activity(index: int, h: Any, s: SlowSample) -> None:
        if not call(("nvmlGpmQueryDeviceSupport",), h).isSupportedDevice:
            raise nv.NVMLError(3)  # not supported: absent from now on
        got = gpm.read((index, -1), lambda sample: nv.nvmlGpmSampleGet(h, sample))
        if got is not None:
            s.activity = activity(got)
            s.pcie, s.nvlink = rates(got, "pcie"), rates(got, "nvlink")

    def mig(index: int, h: Any, s: SlowSample) -> None:
        s.mig = mig_instances(nv, call, gpm, index, h)

    return (
        ("energy", energy),
        ("remapped_rows", remapped),
        ("nvlink_errors", nvlink_errors),
        ("gpm", gpm_activity),
        ("mig", mig),
    )


def mig_instances(nv: Any, call: Call, gpm: GpmPairs, index: int, h: Any) -> tuple[MigSample, ...] | None:
    """The GPU's MIG instances (None when MIG is off). An instance is served with whatever of its
    memory and activity could be read."""
    if call(("nvmlDeviceGetMigMode",), h)[0] != 1:  # NVML_DEVICE_MIG_ENABLE
        return None
    out: list[MigSample] = []
    for slot in range(int(nv.nvmlDeviceGetMaxMigDeviceCount(h))):
        try:
            m = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, slot)
        except nv.NVMLError as exc:
            if code_of(nv, exc) == NOT_FOUND:  # an empty slot
                continue
            raise
        gi = int(nv.nvmlDeviceGetGpuInstanceId(m))
        try:
            ci: int | None = int(nv.nvmlDeviceGetComputeInstanceId(m))
        except nv.NVMLError:
            ci = None
        used = total = None
        try:
            mem = nv.nvmlDeviceGetMemoryInfo(m)
            used, total = float(mem.used), float(mem.total)
        except nv.NVMLError:
            pass
        ratios = None

        def take(sample: Any, gi: int = gi) -> Any:
            return nv.nvmlGpmMigSampleGet(h, gi, sample)
        try:
            got = gpm.read((index, gi), take)
            if got is not None:
                ratios = activity(got)
        except (nv.NVMLError, AttributeError):
            pass  # no GPM on this GPU (or binding): the instance is still served, without activity
        out.append(MigSample(gi, ci, text(nv.nvmlDeviceGetUUID(m)), used, total, ratios))
    return tuple(out)
