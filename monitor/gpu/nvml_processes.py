"""The processes using a GPU, with their names: NVML's compute and graphics lists merged by PID,
names from NVML or, where NVML cannot see the process, from procfs.
"""
from __future__ import annotations

from typing import Any

from monitor.gpu.backend import ProcessSample
from monitor.gpu.nvml_codes import text


class ProcessNames:
    """Process names by PID, remembered: a name is looked up once, not on every scrape."""

    def __init__(self, nv: Any, limit: int = 4096):
        self._nv = nv
        self._limit = limit
        self._names: dict[int, str] = {}

    def __call__(self, pid: int) -> str:
        name = self._names.get(pid)
        if name is not None:
            return name
        try:
            name = text(self._nv.nvmlSystemGetProcessName(pid)).rsplit("/", 1)[-1]
        except self._nv.NVMLError:
            name = ""
        if not name:  # NVML cannot see it (another PID namespace, or permissions): ask procfs
            try:
                with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
                    name = f.read().strip()
            except OSError:
                name = ""
        if len(self._names) > self._limit:  # PIDs are reused; a bounded cache is good enough
            self._names.clear()
        self._names[pid] = name
        return name


def running_processes(nv: Any, h: Any, names: ProcessNames) -> tuple[ProcessSample, ...]:
    """Compute and graphics processes on the GPU behind ``h``, by PID; a process in both lists
    counts the larger of its two memory figures."""
    used: dict[int, int | None] = {}
    for fn in (nv.nvmlDeviceGetComputeRunningProcesses, nv.nvmlDeviceGetGraphicsRunningProcesses):
        for p in fn(h):
            mem = p.usedGpuMemory
            prev = used.get(p.pid)
            used[p.pid] = mem if prev is None else max(prev, mem or 0)
    return tuple(ProcessSample(pid, names(pid), mem) for pid, mem in sorted(used.items()))
