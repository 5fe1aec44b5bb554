"""Health that tells the truth: /livez vs /readyz, a full disk and a read-only store seen live on a
tiny filesystem, and the gauges the DriftloopStoreDown rule reads (rules/tests/service.test.yml
holds the promtool case fed with them)."""
from __future__ import annotations

import errno
import os
import subprocess

import httpx

from tests.faults.conftest import AUTH, fault_config, remount, running_daemon, tiny_filesystem
from tests.faults.test_dependencies import prediction
from tests.support.prometheus import require


def fill(path) -> None:
    """Write to ``path`` until the filesystem is full."""
    with open(path, "wb", buffering=0) as f:
        for block in (65536, 512):  # then the last partial blocks
            try:
                while True:
                    f.write(b"\0" * block)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC


def gauge(metrics: str, name: str) -> str:
    return next(line.split()[-1] for line in metrics.splitlines() if line.startswith(name + "{"))


def test_full_disk_and_read_only_store_are_not_ready_and_page(tmp_path):
    with tiny_filesystem(tmp_path / "home", size="8m") as home:
        cfg = fault_config(home, store={"min_free_bytes": 1024 * 1024, "busy_timeout_seconds": 1})
        with running_daemon(cfg) as (daemon, url), httpx.Client(base_url=url, timeout=30) as c:
            assert c.get("/readyz").status_code == 200
            assert c.post("/v1/predictions", json=[prediction(i) for i in range(50)], headers=AUTH).status_code == 200
            assert gauge(c.get("/metrics").text, "driftloop_store_writable") == "1.0"

            fill(home / "filler")
            r = c.get("/readyz")
            assert r.status_code == 503 and r.headers["retry-after"]
            assert r.json()["checks"]["store"] == "disk_full" and str(home) not in r.text  # no token: the kind
            r = c.get("/readyz", headers=AUTH)
            assert "store.min_free_bytes" in r.json()["error"] and str(home) in r.json()["reasons"]["store"]
            assert c.get("/healthz").status_code == 503 and c.get("/livez").status_code == 200
            metrics = c.get("/metrics").text
            assert gauge(metrics, "driftloop_store_writable") == "0.0"
            assert gauge(metrics, "driftloop_store_up") == "1.0"  # it still reads: the writable gauge pages
            r = c.post("/v1/predictions", json=[prediction(i) for i in range(1000, 3000)], headers=AUTH)
            assert r.status_code == 503 and "full" in r.json()["error"], r.text

            os.unlink(home / "filler")
            assert c.get("/readyz").status_code == 200
            assert daemon.store.row_counts()["predictions"] == 50  # the refused batch left nothing behind
            assert c.post("/v1/predictions", json=[prediction(i) for i in range(1000, 3000)],
                          headers=AUTH).json()["stored"] == 2000

            daemon.store.engine.dispose()  # open read-write files would keep the kernel from remounting
            remount(home, readonly=True)
            try:
                r = c.get("/readyz")
                assert r.status_code == 503 and r.json()["checks"]["store"] == "read_only", r.text
                assert "read-only" in c.get("/readyz", headers=AUTH).json()["reasons"]["store"]
                assert gauge(c.get("/metrics").text, "driftloop_store_writable") == "0.0"
                assert c.post("/v1/predictions", json=[prediction(5000)], headers=AUTH).status_code == 503
            finally:
                remount(home, readonly=False)
            assert c.get("/readyz").status_code == 200


def test_metrics_with_the_new_gauge_pass_promtool(tmp_path):
    cfg = fault_config(tmp_path / "home")
    with running_daemon(cfg) as (_, url):
        body = httpx.get(f"{url}/metrics", timeout=30).content
    assert b"driftloop_store_writable" in body
    lint = subprocess.run([require("promtool"), "check", "metrics"], input=body, capture_output=True)
    assert lint.returncode == 0, lint.stdout.decode() + lint.stderr.decode()
