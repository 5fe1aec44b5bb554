"""NvmlBackend's error translation and unit conversion, against a stand-in for the NVML library.

The stand-in raises the real ``pynvml.NVMLError`` classes (nvidia-ml-py imports fine without a GPU),
so what is tested is exactly how real NVML return codes are translated. The real library is
exercised by test_nvml_real.py on a machine with a GPU, and below for the no-driver case.
"""
from __future__ import annotations

import ctypes
import logging
import os
from types import SimpleNamespace

import pynvml
import pytest

from monitor.gpu.backend import GpuBackendError, GpuLostError, NvmlUnavailableError, XidEvent
from monitor.gpu.nvml import NvmlBackend
from tests.monitor.gpu.helpers import skip_if_nvidia_driver


class Handle:
    def __init__(self, index: int):
        self.index = index


def raises(code: int):
    def fn(*args):
        raise pynvml.NVMLError(code)
    return fn


class StubNvml:
    """Looks like the pynvml module: ``funcs`` by name, calls counted; a missing name is missing."""

    NVMLError = pynvml.NVMLError

    def __init__(self, **overrides):
        self.calls: dict[str, int] = {}
        self.handles: list[Handle] = []
        me = os.getpid()
        self.events: list = []
        self.funcs = {
            "nvmlInit": lambda: None,
            "nvmlShutdown": lambda: None,
            "nvmlSystemGetDriverVersion": lambda: "580.159.03",
            "nvmlSystemGetCudaDriverVersion": lambda: 12040,
            "nvmlDeviceGetCount": lambda: 2,
            "nvmlDeviceGetHandleByIndex": self._handle,
            "nvmlDeviceGetUUID": lambda h: f"GPU-{h.index}",
            "nvmlDeviceGetName": lambda h: b"NVIDIA H200",
            "nvmlDeviceGetPciInfo": lambda h: SimpleNamespace(busId=b"00000000:18:00.0"),
            "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(gpu=75, memory=20),
            "nvmlDeviceGetMemoryInfo": lambda h: SimpleNamespace(used=1 << 30, free=3 << 30, total=4 << 30),
            "nvmlDeviceGetTemperatureV": lambda h, sensor: 45,
            "nvmlDeviceGetTemperature": lambda h, sensor: 44,
            "nvmlDeviceGetPowerUsage": lambda h: 123_456,             # mW
            "nvmlDeviceGetEnforcedPowerLimit": lambda h: 700_000,     # mW
            "nvmlDeviceGetTotalEnergyConsumption": lambda h: 5_000_123,  # mJ
            "nvmlDeviceGetClockInfo": lambda h, t: {1: 1980, 2: 3201}[t],  # MHz
            "nvmlDeviceGetFanSpeed": raises(pynvml.NVML_ERROR_NOT_SUPPORTED),
            "nvmlDeviceGetPerformanceState": lambda h: 0,
            "nvmlDeviceGetCurrentClocksEventReasons": lambda h: 0x5,
            "nvmlDeviceGetCurrentClocksThrottleReasons": lambda h: 0x1,
            "nvmlDeviceGetTotalEccErrors": lambda h, kind, counter: {0: 7, 1: 1}[kind],
            "nvmlDeviceGetPcieReplayCounter": lambda h: 2,
            "nvmlDeviceGetComputeRunningProcesses": lambda h: [SimpleNamespace(pid=me, usedGpuMemory=100),
                                                              SimpleNamespace(pid=2**22 + 7, usedGpuMemory=None)],
            "nvmlDeviceGetGraphicsRunningProcesses": lambda h: [SimpleNamespace(pid=me, usedGpuMemory=50)],
            "nvmlSystemGetProcessName": raises(pynvml.NVML_ERROR_NOT_FOUND),
            "nvmlDeviceGetPcieThroughput": lambda h, counter: {0: 1000, 1: 2000}[counter],  # KB/s
            "nvmlEventSetCreate": lambda: "event-set",
            "nvmlDeviceRegisterEvents": lambda h, types, es: None,
            "nvmlEventSetWait_v2": self._wait,
            "nvmlEventSetFree": lambda es: None,
        }
        self.funcs.update(overrides)

    def _handle(self, index: int) -> Handle:
        h = Handle(index)
        self.handles.append(h)
        return h

    def _wait(self, event_set, timeout_ms):
        if not self.events:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
        return self.events.pop(0)

    def __getattr__(self, name: str):
        fn = self.__dict__["funcs"].get(name)
        if fn is None:
            raise AttributeError(name)

        def counted(*args):
            self.calls[name] = self.calls.get(name, 0) + 1
            return fn(*args)
        return counted


def ticking(step: float = 1.0):
    """A clock one ``step`` later at each reading: back-to-back GPM samples are a full window apart."""
    now = [0.0]

    def clock() -> float:
        now[0] += step
        return now[0]
    return clock


def backend(*, clock=None, **overrides) -> tuple[NvmlBackend, StubNvml]:
    nv = StubNvml(**overrides)
    b = NvmlBackend(nvml=nv, clock=clock or ticking())
    b.init()
    return b, nv


def test_identity_and_driver_versions():
    b, _ = backend()
    assert b.init().driver_version == "580.159.03" and b.init().cuda_driver_version == "12.4"
    assert b.device_count() == 2
    ident = b.identify(1)
    assert (ident.index, ident.uuid, ident.name, ident.pci_bus_id) == (1, "GPU-1", "NVIDIA H200", "00000000:18:00.0")


def test_readings_in_base_units():
    b, _ = backend()
    s = b.sample(0)
    assert s.utilization_ratio == 0.75 and s.memory_bandwidth_utilization_ratio == 0.2
    assert (s.memory_used_bytes, s.memory_free_bytes, s.memory_total_bytes) == (2**30, 3 * 2**30, 4 * 2**30)
    assert s.temperature_celsius == 45
    assert s.power_draw_watts == pytest.approx(123.456) and s.power_limit_watts == pytest.approx(700.0)
    assert s.sm_clock_hertz == 1980e6 and s.memory_clock_hertz == 3201e6
    assert s.performance_state == 0 and s.clock_event_reasons == 0x5
    assert (s.ecc_corrected_errors, s.ecc_uncorrected_errors, s.pcie_replay_errors) == (7, 1, 2)
    assert s.processes is None and s.field_errors == ()


def test_not_supported_is_absent_and_not_asked_again():
    b, nv = backend()
    assert b.sample(0).fan_speed_ratio is None
    assert b.sample(0).fan_speed_ratio is None
    assert nv.calls["nvmlDeviceGetFanSpeed"] == 1
    assert b.sample(0).field_errors == ()


def test_renamed_functions_fall_back_to_the_old_name():
    # The driver lacks the new function (older driver than binding); the binding lacks TemperatureV.
    b, nv = backend(nvmlDeviceGetCurrentClocksEventReasons=raises(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND))
    del nv.funcs["nvmlDeviceGetTemperatureV"]
    s = b.sample(0)
    assert s.clock_event_reasons == 0x1 and s.temperature_celsius == 44
    b.sample(0)
    assert nv.calls["nvmlDeviceGetCurrentClocksEventReasons"] == 1  # the fallback is remembered


def test_function_missing_everywhere_is_logged_once(caplog):
    b, nv = backend()
    del nv.funcs["nvmlDeviceGetCurrentClocksEventReasons"], nv.funcs["nvmlDeviceGetCurrentClocksThrottleReasons"]
    assert b.sample(0).clock_event_reasons is None
    assert b.sample(0).clock_event_reasons is None
    lines = [r for r in caplog.records if r.levelno == logging.WARNING and "clock_events" in r.getMessage()]
    assert len(lines) == 1


def test_lost_gpu_raises_and_is_looked_up_afresh():
    b, nv = backend(nvmlDeviceGetPowerUsage=raises(pynvml.NVML_ERROR_GPU_IS_LOST))
    b.identify(0)
    with pytest.raises(GpuLostError, match="GPU is lost") as exc:
        b.sample(0)
    assert exc.value.gpu == 0
    handles = len(nv.handles)
    nv.funcs["nvmlDeviceGetPowerUsage"] = lambda h: 1000
    b.identify(0)
    assert len(nv.handles) == handles + 1
    assert b.sample(0).power_draw_watts == 1.0


@pytest.mark.parametrize("code", [pynvml.NVML_ERROR_UNKNOWN, pynvml.NVML_ERROR_RESET_REQUIRED,
                                  pynvml.NVML_ERROR_GPU_NOT_FOUND])
def test_other_codes_that_mean_lost(code):
    b, _ = backend(nvmlDeviceGetMemoryInfo=raises(code))
    with pytest.raises(GpuLostError):
        b.sample(0)


def test_unexpected_error_fails_one_field_only():
    b, _ = backend(nvmlDeviceGetPcieReplayCounter=raises(pynvml.NVML_ERROR_MEMORY))
    s = b.sample(0)
    assert s.field_errors == ("pcie_replay",)
    assert s.pcie_replay_errors is None and s.utilization_ratio == 0.75


def test_missing_library_is_unavailable_with_a_hint_and_retried():
    nv = StubNvml(nvmlInit=raises(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND))
    b = NvmlBackend(nvml=nv)
    with pytest.raises(NvmlUnavailableError, match="is the NVIDIA driver installed"):
        b.init()
    nv.funcs["nvmlInit"] = lambda: None  # the driver appears
    assert b.init().driver_version == "580.159.03"
    b.init()
    assert nv.calls["nvmlInit"] == 2  # idempotent once initialised


def test_driver_gone_mid_run_makes_the_next_init_start_over():
    b, nv = backend()
    nv.funcs["nvmlDeviceGetUtilizationRates"] = raises(pynvml.NVML_ERROR_UNINITIALIZED)
    with pytest.raises(NvmlUnavailableError):
        b.sample(0)
    b.init()
    assert nv.calls["nvmlInit"] == 2


def test_processes_merged_and_named():
    b, _ = backend()
    procs = {p.pid: p for p in b.sample(0, processes=True).processes}
    me = procs[os.getpid()]
    assert me.used_memory_bytes == 100  # compute and graphics entries of one PID merged
    with open("/proc/self/comm") as f:
        assert me.name == f.read().strip()  # NVML could not name it: procfs did
    assert procs[2**22 + 7].used_memory_bytes is None and procs[2**22 + 7].name == ""


def test_pcie_throughput_in_bytes_per_second():
    b, _ = backend()
    tp = b.pcie_throughput(0)
    assert (tp.rx_bytes_per_second, tp.tx_bytes_per_second) == (2000 * 1024, 1000 * 1024)
    b2, _ = backend(nvmlDeviceGetPcieThroughput=raises(pynvml.NVML_ERROR_NOT_SUPPORTED))
    assert b2.pcie_throughput(0).rx_bytes_per_second is None


def test_xid_events_mapped_to_gpu_index():
    b, nv = backend()
    b.watch_xid([0, 1])
    gpu1 = nv.handles[-1]
    assert b.wait_xid(0.01) == []
    nv.events += [SimpleNamespace(eventType=0x8, eventData=79, device=gpu1),
                  SimpleNamespace(eventType=0x8, eventData=48, device=nv.handles[0])]
    assert b.wait_xid(0.01) == [XidEvent(1, 79), XidEvent(0, 48)]


def test_wait_without_watch_is_an_error():
    b, _ = backend()
    with pytest.raises(GpuBackendError):
        b.wait_xid(0.01)


def test_real_library_without_a_driver_is_unavailable():
    skip_if_nvidia_driver("this machine has an NVIDIA driver; test_nvml_real.py covers it")
    with pytest.raises(NvmlUnavailableError):
        NvmlBackend().init()


# -- readings added for dcgm-exporter parity (issue 15) ------------------------------------------------

def field_values(table: dict[int, tuple[int, float]]):
    """nvmlDeviceGetFieldValues over ``{field id: (nvmlReturn, value)}``; other ids: not supported."""
    def fn(h, ids):
        out = (pynvml.c_nvmlFieldValue_t * len(ids))()
        for i, fid in enumerate(ids):
            ret, value = table.get(fid, (pynvml.NVML_ERROR_NOT_SUPPORTED, 0))
            out[i].fieldId, out[i].nvmlReturn = fid, ret
            out[i].valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
            out[i].value.ullVal = int(value)
        return out
    return fn


# Percent (or MiB/s) by GPM metric id, as an H100 under a bf16 matmul might report them.
GPM_VALUES = {2: 92.0, 3: 40.0, 5: 71.0, 10: 35.0, 11: 0.0, 12: 3.0, 13: 1.0, 20: 100.0, 21: 300.0}


class Gpm:
    """GPM in the stub: samples are numbered; metrics between two samples come from GPM_VALUES."""

    def __init__(self, nvlink: bool = False):
        self.taken = 0
        self.nvlink = nvlink
        self.freed = 0

    def funcs(self) -> dict:
        return {
            "nvmlGpmQueryDeviceSupport": lambda h: SimpleNamespace(isSupportedDevice=1),
            "nvmlGpmSampleAlloc": lambda: pynvml.c_nvmlGpmSample_t(),
            "nvmlGpmSampleFree": self._free,
            "nvmlGpmSampleGet": self._take,
            "nvmlGpmMigSampleGet": lambda h, gi, sample: self._take(h, sample),
            "c_nvmlGpmMetricsGet_t": pynvml.c_nvmlGpmMetricsGet_t,
            "nvmlGpmMetricsGet": self._metrics,
        }

    def _free(self, sample):
        self.freed += 1

    def _take(self, h, sample):
        self.taken += 1
        return sample

    def _metrics(self, req):
        assert req.version == 1 and req.numMetrics > 0
        values = {**GPM_VALUES, **({60: 1000.0, 61: 2000.0} if self.nvlink else {})}
        for i in range(req.numMetrics):
            m = req.metrics[i]
            if m.metricId in values:
                m.nvmlReturn, m.value = 0, values[m.metricId]
            else:
                m.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return req


def hopper(*, clock=None, gpm=None, **more):
    gpm = gpm or Gpm(nvlink=more.pop("nvlink", False))
    funcs = {
        **gpm.funcs(),
        "nvmlDeviceGetFieldValues": field_values({82: (0, 61), 38: (0, 0), 45: (0, 1), 52: (0, 4), 59: (0, 0)}),
        "nvmlDeviceGetEncoderUtilization": lambda h: [0, 167000],
        "nvmlDeviceGetDecoderUtilization": lambda h: [12, 167000],
        "nvmlDeviceGetCurrPcieLinkGeneration": lambda h: 4,
        "nvmlDeviceGetMaxPcieLinkGeneration": lambda h: 5,
        "nvmlDeviceGetCurrPcieLinkWidth": lambda h: 8,
        "nvmlDeviceGetMaxPcieLinkWidth": lambda h: 16,
        "nvmlDeviceGetRemappedRows": lambda h: (2, 1, 1, 0),
        "nvmlDeviceGetMigMode": raises(pynvml.NVML_ERROR_NOT_SUPPORTED),
        **more,
    }
    b, nv = backend(clock=clock, **funcs)
    return b, nv, gpm


def test_memory_temperature_codecs_and_pcie_link_on_the_fast_path():
    b, _, _ = hopper()
    s = b.sample(0)
    assert s.memory_temperature_celsius == 61.0
    assert (s.encoder_utilization_ratio, s.decoder_utilization_ratio) == (0.0, 0.12)
    assert (s.pcie_link_generation, s.pcie_link_generation_max, s.pcie_link_width,
            s.pcie_link_width_max) == (4, 5, 8, 16)
    assert s.field_errors == ()


def test_energy_remapped_rows_and_nvlink_counters_are_slow_readings():
    b, nv, _ = hopper()
    b.sample(0)
    assert "nvmlDeviceGetTotalEnergyConsumption" not in nv.calls  # 3.1 ms on an H200: not on the scrape path
    s = b.slow_sample(0)
    assert s.energy_joules == pytest.approx(5000.123)
    assert (s.remapped_rows.correctable, s.remapped_rows.uncorrectable) == (2.0, 1.0)
    assert s.remapped_rows.pending and not s.remapped_rows.failure
    assert s.nvlink_errors == {"crc_flit": 0.0, "crc_data": 1.0, "replay": 4.0, "recovery": 0.0}
    assert s.mig is None and s.field_errors == ()


def test_gpm_needs_two_samples_then_gives_ratios_and_rates_in_base_units():
    b, _, gpm = hopper(nvlink=True)
    first = b.slow_sample(0)
    assert first.activity is None and first.pcie is None  # one sample says nothing yet
    assert first.activity_pending  # ... so the sampler comes back soon
    s = b.slow_sample(0)
    assert gpm.taken == 2 and not s.activity_pending
    assert s.activity == pytest.approx({"sm_active": 0.92, "sm_occupancy": 0.40, "tensor_active": 0.71,
                                        "dram_active": 0.35, "fp64_active": 0.0, "fp32_active": 0.03,
                                        "fp16_active": 0.01})
    assert (s.pcie.rx_bytes_per_second, s.pcie.tx_bytes_per_second) == (300 * 2**20, 100 * 2**20)
    assert (s.nvlink.rx_bytes_per_second, s.nvlink.tx_bytes_per_second) == (1000 * 2**20, 2000 * 2**20)
    b.identify(0)  # a new handle: GPM starts over, and the old samples are freed
    assert gpm.freed == 2
    assert b.slow_sample(0).activity is None


def test_gpus_without_gpm_nvlink_or_remapping_leave_them_out_and_are_not_asked_again():
    b, nv, _ = hopper(nvmlGpmQueryDeviceSupport=lambda h: SimpleNamespace(isSupportedDevice=0),
                      nvmlDeviceGetRemappedRows=raises(pynvml.NVML_ERROR_NOT_SUPPORTED),
                      nvmlDeviceGetFieldValues=field_values({82: (0, 40)}))
    for _ in range(3):
        s = b.slow_sample(0)
        assert s.activity is None and s.nvlink is None and s.nvlink_errors is None and s.remapped_rows is None
        assert s.energy_joules is not None and s.field_errors == ()
    assert nv.calls["nvmlGpmQueryDeviceSupport"] == 1 and nv.calls["nvmlDeviceGetRemappedRows"] == 1
    assert "nvmlGpmSampleGet" not in nv.calls


def test_legacy_pcie_counter_only_when_asked_and_gpm_cannot():
    b, nv, _ = hopper(nvmlGpmQueryDeviceSupport=raises(pynvml.NVML_ERROR_NOT_SUPPORTED))
    assert b.slow_sample(0).pcie is None
    assert b.slow_sample(0, pcie_throughput=True).pcie.rx_bytes_per_second == 2000 * 1024
    b2, nv2, _ = hopper()
    b2.slow_sample(0, pcie_throughput=True)
    b2.slow_sample(0, pcie_throughput=True)
    assert nv2.calls["nvmlDeviceGetPcieThroughput"] == 2  # first pass only: GPM has no rate before two samples


def test_a_gpu_lost_during_slow_readings_is_lost():
    b, _, _ = hopper(nvmlDeviceGetTotalEnergyConsumption=raises(pynvml.NVML_ERROR_GPU_IS_LOST))
    with pytest.raises(GpuLostError):
        b.slow_sample(0)


def test_mig_instances_with_their_memory_and_activity():
    mig_handles = {0: SimpleNamespace(gi=1, ci=0), 2: SimpleNamespace(gi=5, ci=0)}

    def by_index(h, slot):
        if slot not in mig_handles:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return mig_handles[slot]

    def memory(h):
        if isinstance(h, SimpleNamespace):
            return SimpleNamespace(used=h.gi << 20, free=0, total=10 << 30)
        return SimpleNamespace(used=1 << 30, free=3 << 30, total=4 << 30)

    b, _, gpm = hopper(nvmlDeviceGetMigMode=lambda h: [1, 1], nvmlDeviceGetMaxMigDeviceCount=lambda h: 7,
                       nvmlDeviceGetMigDeviceHandleByIndex=by_index, nvmlDeviceGetGpuInstanceId=lambda m: m.gi,
                       nvmlDeviceGetComputeInstanceId=lambda m: m.ci, nvmlDeviceGetMemoryInfo=memory,
                       nvmlDeviceGetUUID=lambda h: f"MIG-{h.gi}" if isinstance(h, SimpleNamespace) else "GPU-0")
    first = b.slow_sample(0)
    assert [(m.gpu_instance, m.uuid, m.memory_used_bytes, m.activity) for m in first.mig] == [
        (1, "MIG-1", float(1 << 20), None), (5, "MIG-5", float(5 << 20), None)]
    second = b.slow_sample(0)
    assert second.mig[1].activity["tensor_active"] == pytest.approx(0.71)
    assert second.mig[0].memory_total_bytes == float(10 << 30)


def test_a_binding_without_gpm_functions_leaves_gpm_out(caplog):
    b, nv, _ = hopper()
    for name in ("nvmlGpmSampleAlloc", "nvmlGpmSampleGet"):
        del nv.funcs[name]
    with caplog.at_level(logging.WARNING):
        first, second = b.slow_sample(0), b.slow_sample(0)
    assert first.activity is None and second.activity is None and second.energy_joules is not None
    assert sum("no nvmlGpmSampleAlloc" in r.getMessage() for r in caplog.records) == 1


def test_encoder_and_decoder_are_absent_independently():
    b, _, _ = hopper(nvmlDeviceGetEncoderUtilization=raises(pynvml.NVML_ERROR_NOT_SUPPORTED))
    s = b.sample(0)
    assert s.encoder_utilization_ratio is None and s.decoder_utilization_ratio == 0.12


class ManualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class GpmCounters(Gpm):
    """GPM as the hardware keeps it: a sample holds the time and the SMs' busy time so far, a metric is
    the busy time's change over the window between two samples, and a window under 0.1 s reads 0 (the
    counters refresh every 100 ms). ``busy`` is the share of SMs working from now on."""

    def __init__(self, clock: ManualClock):
        super().__init__()
        self.clock = clock
        self.busy = 0.0
        self._busy_seconds = 0.0
        self._since = clock.now
        self._samples: dict[int, tuple[float, float]] = {}
        self._next = 0x1000

    def set_busy(self, share: float) -> None:
        self._advance()
        self.busy = share

    def _advance(self) -> None:
        self._busy_seconds += self.busy * (self.clock.now - self._since)
        self._since = self.clock.now

    def funcs(self) -> dict:
        return {**super().funcs(), "nvmlGpmSampleAlloc": self._alloc}

    def _alloc(self):
        self._next += 0x100
        return ctypes.cast(ctypes.c_void_p(self._next), pynvml.c_nvmlGpmSample_t)

    @staticmethod
    def _address(sample) -> int:
        return ctypes.cast(sample, ctypes.c_void_p).value or 0

    def _take(self, h, sample):
        self._advance()
        self.taken += 1
        self._samples[self._address(sample)] = (self.clock.now, self._busy_seconds)
        return sample

    def _metrics(self, req):
        (t1, b1), (t2, b2) = self._samples[self._address(req.sample1)], self._samples[self._address(req.sample2)]
        share = (b2 - b1) / (t2 - t1) if t2 - t1 >= 0.1 else 0.0
        for i in range(req.numMetrics):
            m = req.metrics[i]
            m.nvmlReturn, m.value = 0, 100.0 * share if m.metricId in (2, 5) else 0.0
        return req


def test_gpm_ratios_cover_the_last_interval_and_follow_a_load_within_one():
    clock = ManualClock()
    gpm = GpmCounters(clock)
    b, _, _ = hopper(clock=clock, gpm=gpm)
    assert b.slow_sample(0).activity_pending
    for _ in range(12):  # a minute idle
        clock.now += 5.0
        assert b.slow_sample(0).activity["sm_active"] == 0.0
    gpm.set_busy(0.95)  # a matmul loop starts
    clock.now += 5.0
    assert b.slow_sample(0).activity["sm_active"] == pytest.approx(0.95)  # one interval on, not averaged with idle
    clock.now += 2.0
    gpm.set_busy(0.0)
    clock.now += 3.0
    assert b.slow_sample(0).activity["tensor_active"] == pytest.approx(0.95 * 2 / 5)  # the interval just ended


def test_a_sample_sooner_than_gpms_minimum_window_keeps_the_last_full_window():
    """Back-to-back passes (a bench timing the sampler) must not serve a few-millisecond window, which
    real GPM reads as ~0 under full load: the last full window is served and no sample is taken."""
    clock = ManualClock()
    gpm = GpmCounters(clock)
    b, _, _ = hopper(clock=clock, gpm=gpm)
    gpm.set_busy(0.9)
    b.slow_sample(0)
    clock.now += 0.02
    early = b.slow_sample(0)
    assert early.activity is None and early.activity_pending  # no window yet, and none made up
    clock.now += 1.0
    assert b.slow_sample(0).activity["sm_active"] == pytest.approx(0.9)
    taken = gpm.taken
    for _ in range(5):
        clock.now += 0.004
        assert b.slow_sample(0).activity["sm_active"] == pytest.approx(0.9)
    assert gpm.taken == taken
