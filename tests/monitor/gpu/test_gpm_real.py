"""GPM on a real Hopper-or-later GPU (skipped elsewhere): the activity series appear and move under
load. Self-contained (pytest, torch, prometheus-client and nvidia-ml-py only), so on a bare GPU host:

    python -m pytest -m gpu --noconftest tests/monitor/gpu/test_gpm_real.py -s
"""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from monitor.gpu import build_gpu_collector
from monitor.gpu.backend import NvmlUnavailableError
from tests.monitor.gpu.helpers import Scrape

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def nvml():
    from monitor.gpu.nvml import NvmlBackend
    backend = NvmlBackend()
    try:
        backend.init()
    except NvmlUnavailableError as exc:
        pytest.skip(f"no usable NVIDIA GPU: {exc}")
    yield backend
    backend.shutdown()


def _gpm_gpu(nvml) -> int:
    import pynvml
    for index in range(nvml.device_count()):
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        try:
            if pynvml.nvmlGpmQueryDeviceSupport(h).isSupportedDevice:
                return index
        except pynvml.NVMLError:
            pass
    pytest.skip("no GPU here supports GPM (Hopper or later)")


def test_gpm_activity_moves_under_a_bf16_matmul_load(nvml):
    """Tensor activity > 0.5 while a bf16 matmul loop runs, ~0 when idle (issue 15)."""
    index = _gpm_gpu(nvml)
    torch, device = _torch_device(nvml, index)
    torch.cuda.synchronize(device)
    time.sleep(1.0)
    nvml.slow_sample(index)
    time.sleep(1.0)
    idle = nvml.slow_sample(index).activity
    a = torch.randn(8192, 8192, device=f"cuda:{device}", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=f"cuda:{device}", dtype=torch.bfloat16)
    stop = time.monotonic() + 2.5
    nvml.slow_sample(index)
    busy = None
    while time.monotonic() < stop:
        for _ in range(20):
            a @ b
        torch.cuda.synchronize(device)
        if busy is None and time.monotonic() > stop - 1.0:
            busy = nvml.slow_sample(index).activity
    print("idle", idle, "busy", busy)
    assert idle is not None and busy is not None
    assert idle["tensor_active"] < 0.05 and idle["sm_active"] < 0.05
    assert busy["tensor_active"] > 0.5
    assert busy["sm_active"] > 0.8 and busy["tensor_active"] <= busy["sm_active"] + 0.05


def _exporter_config(**changes) -> SimpleNamespace:
    """An ExporterConfig's fields, without pydantic (this file runs on a bare GPU host)."""
    return SimpleNamespace(**{**dict(simulate=0, init_retry_initial_seconds=1.0, init_retry_max_seconds=60.0,
                                     sampler_interval_seconds=0.5, pcie_throughput=False, xid_events=False,
                                     call_timeout_seconds=2.0, process_metrics=False, hostname=None), **changes})


def _torch_device(nvml, index: int):
    """torch's device number for NVML's GPU ``index`` (torch numbers by CUDA_VISIBLE_DEVICES)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch cannot use the GPU here")
    uuid = nvml.identify(index).uuid
    device = next((d for d in range(torch.cuda.device_count())
                   if uuid.endswith(str(getattr(torch.cuda.get_device_properties(d), "uuid", "?")))), None)
    if device is None:
        pytest.skip(f"cannot tell which torch device is GPU {index} ({uuid})")
    return torch, device


def test_gpm_series_are_exported_on_gpm_gpus_from_the_first_scrape(nvml):
    index = _gpm_gpu(nvml)
    collector, close = build_gpu_collector(_exporter_config())
    try:
        s = Scrape(collector.collect())
    finally:
        close()
    for name in ("driftloop_gpu_sm_active_ratio", "driftloop_gpu_sm_occupancy_ratio",
                 "driftloop_gpu_tensor_active_ratio",
                 "driftloop_gpu_dram_active_ratio", "driftloop_gpu_background_sample_age_seconds",
                 "driftloop_gpu_energy_joules_total", "driftloop_gpu_pcie_throughput_bytes_per_second"):
        assert str(index) in s.gpus(name), name
    assert 0 <= s.value("driftloop_gpu_sm_active_ratio", gpu=str(index)) <= 1


def test_the_exporter_serves_sm_active_over_the_last_interval_under_a_matmul_loop(nvml):
    """Issue 38: under a saturating bf16 matmul loop the exporter served sm_active 0.097 while
    utilization read 0.95. Through the whole exporter (collector, background sampler at a 1 s
    interval), sm_active must agree with the load once one interval has passed under it."""
    index = _gpm_gpu(nvml)
    torch, device = _torch_device(nvml, index)
    a = torch.randn(8192, 8192, device=f"cuda:{device}", dtype=torch.bfloat16)
    collector, close = build_gpu_collector(_exporter_config(sampler_interval_seconds=1.0))
    try:
        stop = time.monotonic() + 3.5  # more than two intervals under load, then scrape while it runs
        while time.monotonic() < stop:
            for _ in range(20):
                a @ a
            torch.cuda.synchronize(device)
        for _ in range(20):
            a @ a
        s = Scrape(collector.collect())
        torch.cuda.synchronize(device)
    finally:
        close()
    gpu = str(index)
    sm = s.value("driftloop_gpu_sm_active_ratio", gpu=gpu)
    tensor = s.value("driftloop_gpu_tensor_active_ratio", gpu=gpu)
    print("utilization", s.value("driftloop_gpu_utilization_ratio", gpu=gpu), "sm_active", sm, "tensor_active", tensor,
          "age", s.value("driftloop_gpu_background_sample_age_seconds", gpu=gpu))
    assert sm > 0.5 and tensor > 0.3
