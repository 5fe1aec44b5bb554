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
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch cannot use the GPU here")
    index = _gpm_gpu(nvml)
    # torch numbers devices by CUDA_VISIBLE_DEVICES; find ours by UUID.
    uuid = nvml.identify(index).uuid
    device = next((d for d in range(torch.cuda.device_count())
                   if uuid.endswith(str(getattr(torch.cuda.get_device_properties(d), "uuid", "?")))), None)
    if device is None:
        pytest.skip(f"cannot tell which torch device is GPU {index} ({uuid})")
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


def test_gpm_series_are_exported_on_gpm_gpus(nvml):
    index = _gpm_gpu(nvml)
    cfg = SimpleNamespace(simulate=0, init_retry_initial_seconds=1.0, init_retry_max_seconds=60.0,
                          sampler_interval_seconds=0.5, pcie_throughput=False, xid_events=False,
                          call_timeout_seconds=2.0, process_metrics=False, hostname=None)
    collector, close = build_gpu_collector(cfg)
    try:
        time.sleep(0.1)
        collector.sampler.sample_once()
        s = Scrape(collector.collect())
    finally:
        close()
    for name in ("driftloop_gpu_sm_active_ratio", "driftloop_gpu_sm_occupancy_ratio",
                 "driftloop_gpu_tensor_active_ratio",
                 "driftloop_gpu_dram_active_ratio", "driftloop_gpu_background_sample_age_seconds",
                 "driftloop_gpu_energy_joules_total", "driftloop_gpu_pcie_throughput_bytes_per_second"):
        assert str(index) in s.gpus(name), name
    assert 0 <= s.value("driftloop_gpu_sm_active_ratio", gpu=str(index)) <= 1
