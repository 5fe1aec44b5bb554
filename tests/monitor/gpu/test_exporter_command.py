"""`driftloop exporter` as users run it: a subprocess, scraped, then stopped with SIGTERM."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import httpx

from tests.monitor.gpu.helpers import Scrape, skip_if_nvidia_driver
from tests.support.waiting import wait_until


def _driftloop(*args: str, cwd) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRIFTLOOP_")}
    return subprocess.Popen([sys.executable, "-m", "monitor.cli", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_scrape(url: str, proc: subprocess.Popen, timeout: float = 30) -> httpx.Response:

    def scraped() -> httpx.Response:
        if proc.poll() is not None:
            raise AssertionError(f"exporter exited: {proc.communicate(timeout=5)}")
        return httpx.get(url, timeout=5)

    return wait_until(scraped, timeout, 0.1, "exporter did not come up", ignoring=(httpx.TransportError,))


def test_simulated_exporter_serves_and_stops_cleanly_on_sigterm(port, tmp_path):
    proc = _driftloop("exporter", "--simulate", "2", "--port", str(port), "--process-metrics", cwd=tmp_path)
    try:
        r = _wait_for_scrape(f"http://127.0.0.1:{port}/metrics", proc)
        s = Scrape.from_text(r.text)
        assert s.value("driftloop_gpu_up") == 1.0
        assert s.gpus("driftloop_gpu_power_draw_watts") == {"0", "1"}
        assert (s.has("process_cpu_seconds_total") and s.has("python_info")
                and s.has("python_gc_objects_collected_total"))
        from importlib.metadata import version
        assert s.value("driftloop_build_info", component="exporter", version=version("driftloop")) == 1.0
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "serving http://127.0.0.1:%d/metrics" % port in err
    assert "Traceback" not in err


def test_exporter_without_a_driver_serves_up_0(port, tmp_path):
    # The exporter must start on a machine without NVIDIA's library (this CI machine, for one).
    skip_if_nvidia_driver()
    proc = _driftloop("exporter", "--port", str(port), cwd=tmp_path)
    try:
        r = _wait_for_scrape(f"http://127.0.0.1:{port}/metrics", proc)
        assert Scrape.from_text(r.text).value("driftloop_gpu_up") == 0.0
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    unavailable = [line for line in err.splitlines() if "NVML unavailable" in line]
    assert len(unavailable) == 1 and "retrying in 1 s" in unavailable[0]


def test_user_mistakes_are_one_line_errors(port, tmp_path):
    proc = _driftloop("exporter", "--simulate", "1", "--tls-cert", "cert.pem", "--port", str(port), cwd=tmp_path)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert err.startswith("Error: invalid configuration") and "tls_cert and tls_key" in err
    assert "Traceback" not in err

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()
        proc = _driftloop("exporter", "--simulate", "1", "--port", str(port), cwd=tmp_path)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert err.strip().splitlines()[-1].startswith(f"Error: cannot listen on 127.0.0.1:{port}")
