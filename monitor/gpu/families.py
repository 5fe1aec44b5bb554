"""The metric families the GPU collector serves: names, help, labels, and how readings become samples.

Every GPU series carries ``gpu`` (index) and ``uuid``, and ``hostname`` when one is configured
(snake_case, so ``promtool check metrics`` stays clean; the dcgm-compatible recording rules publish it
as dcgm-exporter's ``Hostname`` and the ``_info`` metric's ``name`` as ``modelName``); MIG instances are their own
entities with a ``gpu_instance`` label on the
families that make sense per instance (memory, GPM activity). Readings the background sampler took
(:class:`SlowSample`) are served with their age.

Label dicts are built once per GPU identity and reused on every scrape (the exposition writer caches
their formatted strings), and samples are appended straight into :class:`Metric` objects rather than
through the ``*MetricFamily.add_metric`` helpers.
"""
from __future__ import annotations

from typing import Iterable

from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from monitor.gpu.backend import (ACTIVITY_FIELDS, CLOCK_EVENT_REASONS, NVLINK_ERROR_TYPES, DriverInfo, GpuIdentity,
                                 GpuSample, MigSample, PcieThroughput, SlowSample)

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
    ("memory_temperature_celsius", "driftloop_gpu_memory_temperature_celsius", "Device memory (HBM) temperature."),
    ("encoder_utilization_ratio", "driftloop_gpu_encoder_utilization_ratio",
     "Share of the last sample period the video encoder was busy (0-1)."),
    ("decoder_utilization_ratio", "driftloop_gpu_decoder_utilization_ratio",
     "Share of the last sample period the video decoder was busy (0-1)."),
    ("pcie_link_generation", "driftloop_gpu_pcie_link_generation", "Current PCIe link generation (drops when idle)."),
    ("pcie_link_generation_max", "driftloop_gpu_pcie_link_generation_max",
     "Highest PCIe link generation the GPU and the slot support."),
    ("pcie_link_width", "driftloop_gpu_pcie_link_width", "Current PCIe link width (lanes)."),
    ("pcie_link_width_max", "driftloop_gpu_pcie_link_width_max", "Widest PCIe link the GPU and the slot support."),
)
COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("pcie_replay_errors", "driftloop_gpu_pcie_replay_errors", "PCIe replays (link-level retransmissions)."),
)
# GPM activity (Hopper and later), averaged over the sampler's interval; keys of SlowSample.activity.
ACTIVITY: tuple[tuple[str, str, str], ...] = (
    ("sm_active", "driftloop_gpu_sm_active_ratio",
     "Share of SMs with at least one warp resident, averaged over cycles (0-1; dcgm's PROF_SM_ACTIVE)."),
    ("sm_occupancy", "driftloop_gpu_sm_occupancy_ratio",
     "Resident warps as a share of the SMs' maximum (0-1; dcgm's PROF_SM_OCCUPANCY)."),
    ("tensor_active", "driftloop_gpu_tensor_active_ratio",
     "Share of cycles the tensor cores were busy, any precision (0-1; dcgm's PROF_PIPE_TENSOR_ACTIVE)."),
    ("dram_active", "driftloop_gpu_dram_active_ratio",
     "Device memory bandwidth used as a share of its peak (0-1; dcgm's PROF_DRAM_ACTIVE)."),
    ("fp64_active", "driftloop_gpu_fp64_active_ratio", "Share of cycles the FP64 pipe was busy, tensor cores excluded "
                                                       "(0-1)."),
    ("fp32_active", "driftloop_gpu_fp32_active_ratio", "Share of cycles the FP32 pipe was busy, tensor cores excluded "
                                                       "(0-1)."),
    ("fp16_active", "driftloop_gpu_fp16_active_ratio", "Share of cycles the FP16 pipe was busy, tensor cores excluded "
                                                       "(0-1)."),
)
assert tuple(a for a, _, _ in ACTIVITY) == ACTIVITY_FIELDS
ENERGY = ("driftloop_gpu_energy_joules", "Energy consumed since the driver was loaded (background sampler).")
NVLINK = ("driftloop_gpu_nvlink_throughput_bytes_per_second", "NVLink data throughput by direction, all links (GPM).")
NVLINK_ERRORS = ("driftloop_gpu_nvlink_errors", "NVLink errors since the driver was loaded, all links, by type.")
REMAPPED = ("driftloop_gpu_remapped_rows", "Memory rows remapped because of ECC errors, by type (correctable, "
                                           "uncorrectable).")
REMAP_PENDING = ("driftloop_gpu_remapped_rows_pending", "1 while a row remap waits for the next GPU reset, else 0.")
REMAP_FAILED = ("driftloop_gpu_remapped_rows_failed", "1 when a row remap has failed (replace the GPU), else 0.")
AGE = ("driftloop_gpu_background_sample_age_seconds",
       "Age of the slow readings (energy, GPM activity, PCIe/NVLink throughput and counters) served for this GPU.")
MIG_INFO = ("driftloop_gpu_mig_info", "A MIG instance of this GPU; always 1.")
ECC = ("driftloop_gpu_ecc_errors", "ECC memory errors since the driver was loaded, by type.")
CLOCK_EVENTS = ("driftloop_gpu_clock_event_active", "1 while this reason holds the clocks down (throttling), else 0.")
INFO = ("driftloop_gpu_info", "Identity of the GPU; always 1.")
PROCESS_MEMORY = ("driftloop_gpu_process_memory_used_bytes", "Device memory used by a process (opt-in).")
PCIE = ("driftloop_gpu_pcie_throughput_bytes_per_second",
        "PCIe throughput by direction, sampled in the background (GPM; NVML's older counter when pcie_throughput is "
        "on).")
XID = ("driftloop_gpu_xid_errors", "XID errors reported by the driver, by XID code (opt-in).")
UP = ("driftloop_gpu_up", "1 when NVML is initialised and answering, else 0.")
ERRORS = ("driftloop_gpu_collection_errors", "Scrapes in which reading this GPU failed, timed out or it was lost.")
DURATION = ("driftloop_gpu_collection_duration_seconds", "Time the last collection of GPU metrics took.")


def _family(spec: tuple[str, str], typ: str) -> Metric:
    return Metric(spec[0], spec[1], typ)


def describe() -> list[Metric]:
    """Every family, without samples: what a registry needs to refuse a duplicate name."""
    names = [Metric(n, h, "gauge") for _, n, h in GAUGES + ACTIVITY]
    names += [Metric(n, h, "counter") for _, n, h in COUNTERS]
    names += [_family(s, "gauge") for s in (CLOCK_EVENTS, INFO, UP, DURATION, PROCESS_MEMORY, PCIE, NVLINK,
                                            REMAP_PENDING, REMAP_FAILED, AGE, MIG_INFO)]
    names += [_family(s, "counter") for s in (ECC, ERRORS, XID, ENERGY, NVLINK_ERRORS, REMAPPED)]
    return names


class Families:
    """Builds one scrape's families; holds the per-GPU label dicts between scrapes."""

    def __init__(self, hostname: str | None = None) -> None:
        self._host = {"hostname": hostname} if hostname else {}
        self._labels: dict[GpuIdentity, dict[str, str]] = {}
        self._mig_labels: dict[tuple[GpuIdentity, int], dict[str, str]] = {}
        self._reason_labels: dict[GpuIdentity, list[tuple[int, dict[str, str]]]] = {}
        self._ecc_labels: dict[GpuIdentity, tuple[dict[str, str], dict[str, str]]] = {}

    def _base_labels(self, ident: GpuIdentity) -> dict[str, str]:
        labels = self._labels.get(ident)
        if labels is None:
            if len(self._labels) > 4096:  # identities change only on re-discovery; bound it anyway
                self._labels.clear()
                self._reason_labels.clear()
                self._ecc_labels.clear()
                self._mig_labels.clear()
            labels = self._labels[ident] = {"gpu": str(ident.index), "uuid": ident.uuid, **self._host}
            self._reason_labels[ident] = [(bit, {**labels, "reason": r}) for bit, r in CLOCK_EVENT_REASONS]
            self._ecc_labels[ident] = ({**labels, "type": "corrected"}, {**labels, "type": "uncorrected"})
        return labels

    def _instance_labels(self, ident: GpuIdentity, mig: MigSample) -> dict[str, str]:
        key = (ident, mig.gpu_instance)
        labels = self._mig_labels.get(key)
        if labels is None:
            labels = self._mig_labels[key] = {**self._base_labels(ident), "gpu_instance": str(mig.gpu_instance)}
        return labels

    def gpus(self, readings: dict[GpuIdentity, GpuSample], driver: DriverInfo | None,
             process_metrics: bool, slow: dict[int, tuple[float, SlowSample]] | None = None) -> list[Metric]:
        if not readings:
            return []
        rows = sorted(((ident.index, ident, self._base_labels(ident), s) for ident, s in readings.items()),
                      key=lambda r: r[0])
        families = [self._info(rows, driver)]
        by_name: dict[str, Metric] = {}
        for attr, name, help_ in GAUGES:
            m = Metric(name, help_, "gauge")
            add = m.samples.append
            for _, _, labels, s in rows:
                v = getattr(s, attr)
                if v is not None:
                    add(Sample(name, labels, v))
            families.append(m)
            by_name[attr] = m
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
        if slow:
            families += self._slow(rows, slow, by_name)
        return [f for f in families if f.samples]

    def _slow(self, rows: list, slow: dict[int, tuple[float, SlowSample]], fast: dict[str, Metric]) -> list[Metric]:
        energy, age = _family(ENERGY, "counter"), _family(AGE, "gauge")
        pcie, nvlink = _family(PCIE, "gauge"), _family(NVLINK, "gauge")
        nvlink_errors, remapped = _family(NVLINK_ERRORS, "counter"), _family(REMAPPED, "counter")
        pending, failed, mig_info = (_family(REMAP_PENDING, "gauge"), _family(REMAP_FAILED, "gauge"),
                                     _family(MIG_INFO, "gauge"))
        activity = [(attr, _family((name, help_), "gauge")) for attr, name, help_ in ACTIVITY]
        for index, ident, labels, _ in rows:
            entry = slow.get(index)
            if entry is None:
                continue
            seconds, s = entry
            age.samples.append(Sample(AGE[0], labels, seconds))
            if s.energy_joules is not None:
                energy.samples.append(Sample(ENERGY[0] + "_total", labels, s.energy_joules))
            _directions(pcie, PCIE[0], labels, s.pcie)
            _directions(nvlink, NVLINK[0], labels, s.nvlink)
            if s.activity:
                for attr, m in activity:
                    v = s.activity.get(attr)
                    if v is not None:
                        m.samples.append(Sample(m.name, labels, v))
            for kind in NVLINK_ERROR_TYPES:
                v = (s.nvlink_errors or {}).get(kind)
                if v is not None:
                    nvlink_errors.samples.append(Sample(NVLINK_ERRORS[0] + "_total", {**labels, "type": kind}, v))
            r = s.remapped_rows
            if r is not None:
                remapped.samples += [Sample(REMAPPED[0] + "_total", {**labels, "type": "correctable"}, r.correctable),
                                     Sample(REMAPPED[0] + "_total", {**labels, "type": "uncorrectable"},
                                            r.uncorrectable)]
                pending.samples.append(Sample(REMAP_PENDING[0], labels, 1.0 if r.pending else 0.0))
                failed.samples.append(Sample(REMAP_FAILED[0], labels, 1.0 if r.failure else 0.0))
            for mig in s.mig or ():
                ilabels = self._instance_labels(ident, mig)
                info = {**ilabels, "mig_uuid": mig.uuid}
                if mig.compute_instance is not None:
                    info["compute_instance"] = str(mig.compute_instance)
                mig_info.samples.append(Sample(MIG_INFO[0], info, 1.0))
                for attr, v in (("memory_used_bytes", mig.memory_used_bytes),
                                ("memory_total_bytes", mig.memory_total_bytes)):
                    if v is not None:
                        fast[attr].samples.append(Sample(fast[attr].name, ilabels, v))
                for attr, m in activity:
                    v = (mig.activity or {}).get(attr)
                    if v is not None:
                        m.samples.append(Sample(m.name, ilabels, v))
        return [energy, pcie, nvlink, *(m for _, m in activity), nvlink_errors, remapped, pending, failed,
                mig_info, age]

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

    def xid(self, counts: dict[tuple[int, int], int], uuids: dict[int, str]) -> list[Metric]:
        # Kept for GPUs that are lost since: an XID 79 is exactly the series that must stay visible.
        m = _family(XID, "counter")
        for (index, xid), n in sorted(counts.items()):
            m.samples.append(Sample(XID[0] + "_total", {"gpu": str(index), "uuid": uuids.get(index, ""),
                                                         **self._host, "xid": str(xid)}, float(n)))
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


def _directions(m: Metric, name: str, labels: dict[str, str], tp: PcieThroughput | None) -> None:
    if tp is None:
        return
    if tp.rx_bytes_per_second is not None:
        m.samples.append(Sample(name, {**labels, "direction": "rx"}, tp.rx_bytes_per_second))
    if tp.tx_bytes_per_second is not None:
        m.samples.append(Sample(name, {**labels, "direction": "tx"}, tp.tx_bytes_per_second))
