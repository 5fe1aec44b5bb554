"""The metric families the GPU collector serves: names, help, labels, and how readings become samples.

Label dicts are built once per GPU identity and reused on every scrape (the exposition writer caches
their formatted strings), and samples are appended straight into :class:`Metric` objects rather than
through the ``*MetricFamily.add_metric`` helpers.
"""
from __future__ import annotations

from typing import Iterable

from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from monitor.gpu.backend import CLOCK_EVENT_REASONS, DriverInfo, GpuIdentity, GpuSample, PcieThroughput

# (GpuSample attribute, metric name, help). Gauges first, then counters (name without `_total`).
GAUGES: tuple[tuple[str, str, str], ...] = (
    ("utilization_ratio", "driftloop_gpu_utilization_ratio",
     "Share of the last sample period during which a kernel was running (0-1)."),
    ("memory_bandwidth_utilization_ratio", "driftloop_gpu_memory_bandwidth_utilization_ratio",
     "Share of the last sample period during which device memory was read or written (0-1)."),
    ("memory_used_bytes", "driftloop_gpu_memory_used_bytes", "Device memory in use."),
    ("memory_free_bytes", "driftloop_gpu_memory_free_bytes", "Device memory free."),
    ("memory_total_bytes", "driftloop_gpu_memory_total_bytes", "Device memory in total."),
    ("temperature_celsius", "driftloop_gpu_temperature_celsius", "GPU core temperature."),
    ("power_draw_watts", "driftloop_gpu_power_draw_watts", "Power draw of the board."),
    ("power_limit_watts", "driftloop_gpu_power_limit_watts", "Power limit the driver enforces."),
    ("sm_clock_hertz", "driftloop_gpu_sm_clock_hertz", "Current SM clock."),
    ("memory_clock_hertz", "driftloop_gpu_memory_clock_hertz", "Current memory clock."),
    ("fan_speed_ratio", "driftloop_gpu_fan_speed_ratio", "Intended fan speed as a share of its maximum (0-1)."),
    ("performance_state", "driftloop_gpu_performance_state", "Performance state: 0 (P0, fastest) to 15 (P15)."),
)
COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("energy_joules", "driftloop_gpu_energy_joules", "Energy consumed since the driver was loaded."),
    ("pcie_replay_errors", "driftloop_gpu_pcie_replay_errors", "PCIe replays (link-level retransmissions)."),
)
ECC = ("driftloop_gpu_ecc_errors", "ECC memory errors since the driver was loaded, by type.")
CLOCK_EVENTS = ("driftloop_gpu_clock_event_active", "1 while this reason holds the clocks down (throttling), else 0.")
INFO = ("driftloop_gpu_info", "Identity of the GPU; always 1.")
PROCESS_MEMORY = ("driftloop_gpu_process_memory_used_bytes", "Device memory used by a process (opt-in).")
PCIE = ("driftloop_gpu_pcie_throughput_bytes_per_second", "PCIe throughput by direction, sampled in the background (opt-in).")
XID = ("driftloop_gpu_xid_errors", "XID errors reported by the driver, by XID code (opt-in).")
UP = ("driftloop_gpu_up", "1 when NVML is initialised and answering, else 0.")
ERRORS = ("driftloop_gpu_collection_errors", "Scrapes in which reading this GPU failed, timed out or it was lost.")
DURATION = ("driftloop_gpu_collection_duration_seconds", "Time the last collection of GPU metrics took.")


def _family(spec: tuple[str, str], typ: str) -> Metric:
    return Metric(spec[0], spec[1], typ)


def describe() -> list[Metric]:
    """Every family, without samples: what a registry needs to refuse a duplicate name."""
    names = [Metric(n, h, "gauge") for _, n, h in GAUGES] + [Metric(n, h, "counter") for _, n, h in COUNTERS]
    names += [_family(s, "gauge") for s in (CLOCK_EVENTS, INFO, UP, DURATION, PROCESS_MEMORY, PCIE)]
    names += [_family(s, "counter") for s in (ECC, ERRORS, XID)]
    return names


class Families:
    """Builds one scrape's families; holds the per-GPU label dicts between scrapes."""

    def __init__(self) -> None:
        self._labels: dict[GpuIdentity, dict[str, str]] = {}
        self._reason_labels: dict[GpuIdentity, list[tuple[int, dict[str, str]]]] = {}
        self._ecc_labels: dict[GpuIdentity, tuple[dict[str, str], dict[str, str]]] = {}

    def _base_labels(self, ident: GpuIdentity) -> dict[str, str]:
        labels = self._labels.get(ident)
        if labels is None:
            if len(self._labels) > 4096:  # identities change only on re-discovery; bound it anyway
                self._labels.clear()
                self._reason_labels.clear()
                self._ecc_labels.clear()
            labels = self._labels[ident] = {"gpu": str(ident.index), "uuid": ident.uuid}
            self._reason_labels[ident] = [(bit, {**labels, "reason": r}) for bit, r in CLOCK_EVENT_REASONS]
            self._ecc_labels[ident] = ({**labels, "type": "corrected"}, {**labels, "type": "uncorrected"})
        return labels

    def gpus(self, readings: dict[GpuIdentity, GpuSample], driver: DriverInfo | None,
             process_metrics: bool) -> list[Metric]:
        if not readings:
            return []
        rows = sorted(((ident.index, ident, self._base_labels(ident), s) for ident, s in readings.items()),
                      key=lambda r: r[0])
        families = [self._info(rows, driver)]
        for attr, name, help_ in GAUGES:
            m = Metric(name, help_, "gauge")
            add = m.samples.append
            for _, _, labels, s in rows:
                v = getattr(s, attr)
                if v is not None:
                    add(Sample(name, labels, v))
            families.append(m)
        for attr, name, help_ in COUNTERS:
            m = Metric(name, help_, "counter")
            add, total = m.samples.append, name + "_total"
            for _, _, labels, s in rows:
                v = getattr(s, attr)
                if v is not None:
                    add(Sample(total, labels, v))
            families.append(m)
        events = _family(CLOCK_EVENTS, "gauge")
        ecc = _family(ECC, "counter")
        ecc_total = ECC[0] + "_total"
        for _, ident, _, s in rows:
            mask = s.clock_event_reasons
            if mask is not None:
                events.samples.extend([Sample(CLOCK_EVENTS[0], lbl, 1.0 if mask & bit else 0.0)
                                       for bit, lbl in self._reason_labels[ident]])
            corrected, uncorrected = self._ecc_labels[ident]
            if s.ecc_corrected_errors is not None:
                ecc.samples.append(Sample(ecc_total, corrected, s.ecc_corrected_errors))
            if s.ecc_uncorrected_errors is not None:
                ecc.samples.append(Sample(ecc_total, uncorrected, s.ecc_uncorrected_errors))
        families += [events, ecc]
        if process_metrics:
            families.append(self._processes(rows))
        return [f for f in families if f.samples]

    def _info(self, rows: list, driver: DriverInfo | None) -> Metric:
        dv, cv = (driver.driver_version, driver.cuda_driver_version) if driver else ("", "")
        m = _family(INFO, "gauge")
        for _, ident, labels, _ in rows:
            m.samples.append(Sample(INFO[0], {**labels, "name": ident.name, "driver_version": dv,
                                              "cuda_driver_version": cv, "pci_bus_id": ident.pci_bus_id}, 1.0))
        return m

    def _processes(self, rows: list) -> Metric:
        m = _family(PROCESS_MEMORY, "gauge")
        for _, _, labels, s in rows:
            for p in s.processes or ():
                if p.used_memory_bytes is not None:
                    m.samples.append(Sample(PROCESS_MEMORY[0], {**labels, "pid": str(p.pid), "process": p.name},
                                            p.used_memory_bytes))
        return m

    def pcie(self, snapshot: dict[int, PcieThroughput], gpus: dict[int, GpuIdentity]) -> list[Metric]:
        m = _family(PCIE, "gauge")
        for index, tp in sorted(snapshot.items()):
            ident = gpus.get(index)
            if ident is None:  # lost since it was sampled
                continue
            labels = self._base_labels(ident)
            if tp.rx_bytes_per_second is not None:
                m.samples.append(Sample(PCIE[0], {**labels, "direction": "rx"}, tp.rx_bytes_per_second))
            if tp.tx_bytes_per_second is not None:
                m.samples.append(Sample(PCIE[0], {**labels, "direction": "tx"}, tp.tx_bytes_per_second))
        return [m] if m.samples else []

    @staticmethod
    def xid(counts: dict[tuple[int, int], int], uuids: dict[int, str]) -> list[Metric]:
        # Kept for GPUs that are lost since: an XID 79 is exactly the series that must stay visible.
        m = _family(XID, "counter")
        for (index, xid), n in sorted(counts.items()):
            m.samples.append(Sample(XID[0] + "_total", {"gpu": str(index), "uuid": uuids.get(index, ""),
                                                         "xid": str(xid)}, float(n)))
        return [m] if m.samples else []

    @staticmethod
    def own(up: bool, errors: dict[int, int], indices: Iterable[int], duration: float) -> list[Metric]:
        """The exporter's own: up, errors per GPU (0 for every GPU ever seen), collection time."""
        m_up = _family(UP, "gauge")
        m_up.samples.append(Sample(UP[0], {}, 1.0 if up else 0.0))
        m_errors = _family(ERRORS, "counter")
        for index in sorted(set(indices) | set(errors)):
            m_errors.samples.append(Sample(ERRORS[0] + "_total", {"gpu": str(index)}, float(errors.get(index, 0))))
        m_duration = _family(DURATION, "gauge")
        m_duration.samples.append(Sample(DURATION[0], {}, duration))
        return [m_up, m_errors, m_duration]
