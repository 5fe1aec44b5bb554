"""The daemon on a machine with an NVIDIA GPU (``pytest -m gpu``; skipped elsewhere): the real
NVML collector on its /metrics, and a retrain child that trains on CUDA and is settled."""
from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from monitor.daemon.runtime.daemon import Daemon
from tests.monitor.daemon.conftest import Traffic

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with a driver")]


def test_daemon_exports_real_gpus_and_retrains_on_cuda(make_config):
    cfg = make_config({"server": {"gpu_metrics": True}, "training": {"device": "cuda"}})
    daemon = Daemon(cfg)
    try:
        text = generate_latest(daemon.registry).decode()
        assert "driftloop_gpu_up 1.0" in text and 'driftloop_gpu_memory_total_bytes{gpu="0"' in text
        traffic = Traffic(cfg, daemon.store)
        traffic.send(1500, 200, concept=1.0)
        result = daemon.retrain_now("manual", "GPU check")
        assert result.details["attempt_id"], result.action
        assert daemon.wait_for_retrain(600)
        attempt = daemon.controller.attempts.get(result.details["attempt_id"])
        assert attempt.status in ("promoted", "rejected"), attempt.error
        assert attempt.samples_per_second > 0
        assert "driftloop_retrain_running" in generate_latest(daemon.registry).decode()
    finally:
        daemon.stop()
