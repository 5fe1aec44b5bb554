"""NvmlBackend's error translation and unit conversion, against a stand-in for the NVML library.

The stand-in raises the real ``pynvml.NVMLError`` classes (nvidia-ml-py imports fine without a GPU),
so what is tested is exactly how real NVML return codes are translated. The real library is
exercised by test_nvml_real.py on a machine with a GPU, and below for the no-driver case.
"""
from __future__ import annotations

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


def backend(**overrides) -> tuple[NvmlBackend, StubNvml]:
    nv = StubNvml(**overrides)
    b = NvmlBackend(nvml=nv)
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
    assert s.energy_joules == pytest.approx(5000.123)
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
