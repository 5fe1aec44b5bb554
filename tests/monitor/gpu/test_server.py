"""The exporter's HTTP server over real sockets: exposition formats, endpoints, promtool, TLS."""
from __future__ import annotations

import datetime
import gzip
import ipaddress
import json
import socket
import ssl
import subprocess

import httpx
import pytest
from prometheus_client import CollectorRegistry

from monitor.errors import UserInputError
from monitor.gpu import build_gpu_collector
from monitor.gpu.server import ExporterServer
from tests.monitor.gpu.helpers import Scrape
from tests.support.prometheus import require


@pytest.fixture
def serve():
    """Start an ExporterServer over a collector; everything is stopped after the test."""
    stack = []

    def start(collector, **kwargs) -> ExporterServer:
        registry = CollectorRegistry(auto_describe=True)
        registry.register(collector)
        server = ExporterServer(registry, "127.0.0.1", 0, health=collector.health, poll_interval=0.05,
                                **kwargs).start()
        stack.append(server)
        return server

    yield start
    for server in stack:
        server.close()


@pytest.fixture
def simulated(config):
    """A simulated collector with every opt-in part on, as `driftloop exporter --simulate 2` builds it."""
    cfg = config.exporter.model_copy(update={"simulate": 2, "process_metrics": True, "pcie_throughput": True,
                                             "xid_events": True})
    collector, close = build_gpu_collector(cfg)
    yield collector
    close()


def test_text_exposition_over_http(fake, make_collector, serve):
    server = serve(make_collector(fake))
    r = httpx.get(f"{server.url}/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    s = Scrape.from_text(r.text)
    assert s.value("driftloop_gpu_up") == 1.0
    assert s.gpus("driftloop_gpu_temperature_celsius") == {"0", "1"}
    assert "# TYPE driftloop_gpu_pcie_replay_errors_total counter" in r.text


def test_openmetrics_is_negotiated(fake, make_collector, serve):
    server = serve(make_collector(fake))
    r = httpx.get(f"{server.url}/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert r.headers["content-type"].startswith("application/openmetrics-text")
    assert r.text.endswith("# EOF\n")
    assert 'driftloop_gpu_pcie_replay_errors_total{gpu="0",uuid="GPU-fake-0000"} 1.0' in r.text


def test_openmetrics_output_parses_strictly(simulated, serve):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
    server = serve(simulated)
    r = httpx.get(f"{server.url}/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    families = {f.name: f for f in text_string_to_metric_families(r.text)}
    assert families["driftloop_gpu_energy_joules"].type == "counter"
    assert families["driftloop_gpu_info"].type == "gauge"
    assert families["driftloop_gpu_collection_errors"].type == "counter"


def test_gzip_when_accepted(fake, make_collector, serve):
    server = serve(make_collector(fake))
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n")
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head, body = raw.split(b"\r\n\r\n", 1)
    assert b"Content-Encoding: gzip" in head
    assert b"driftloop_gpu_up 1.0" in gzip.decompress(body)


def test_landing_health_and_errors_are_4xx(fake, make_collector, serve):
    server = serve(make_collector(fake))
    fake.lose(1)
    httpx.get(f"{server.url}/metrics")
    assert 'href="/metrics"' in httpx.get(server.url + "/").text
    health = httpx.get(server.url + "/healthz").json()
    assert health == {"status": "ok", "nvml_up": True, "gpus": [0], "lost": [1], "not_answering": []}
    assert httpx.get(server.url + "/nope").status_code == 404
    r = httpx.post(server.url + "/metrics", content=b"x" * 1000)
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD"
    assert httpx.head(server.url + "/metrics").status_code == 200


def test_up_0_is_served_without_a_driver(make_collector, serve):
    from monitor.gpu.fake import FakeBackend
    server = serve(make_collector(FakeBackend(gpus=2, available=False)))
    r = httpx.get(f"{server.url}/metrics")
    assert r.status_code == 200 and Scrape.from_text(r.text).value("driftloop_gpu_up") == 0.0
    assert json.loads(httpx.get(server.url + "/healthz").text)["nvml_up"] is False


def test_promtool_finds_nothing_to_lint(simulated, serve):
    promtool = require("promtool")
    server = serve(simulated)
    text = httpx.get(f"{server.url}/metrics").text  # promtool lints the text format only
    assert "driftloop_gpu_pcie_throughput_bytes_per_second" in text
    assert "driftloop_gpu_process_memory_used_bytes" in text
    proc = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "" and proc.stderr.strip() == ""


def _self_signed(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def test_tls_with_a_self_signed_certificate(fake, make_collector, serve, tmp_path):
    cert, key = _self_signed(tmp_path)
    server = serve(make_collector(fake), tls_cert=cert, tls_key=key)
    assert server.url.startswith("https://")
    ctx = ssl.create_default_context(cafile=str(cert))
    r = httpx.get(f"{server.url}/metrics", verify=ctx)
    assert Scrape.from_text(r.text).value("driftloop_gpu_up") == 1.0
    with pytest.raises(httpx.HTTPError):  # plain HTTP to the TLS port is refused...
        httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=5)
    assert httpx.get(f"{server.url}/healthz", verify=ctx).status_code == 200  # ...and the server carries on


def test_bad_certificate_and_busy_port_are_user_errors(tmp_path, port):
    bogus = tmp_path / "bogus.pem"
    bogus.write_text("not a certificate")
    with pytest.raises(UserInputError, match="cannot load TLS certificate"):
        ExporterServer(CollectorRegistry(), "127.0.0.1", port, tls_cert=bogus, tls_key=bogus)
    first = ExporterServer(CollectorRegistry(), "127.0.0.1", port)
    try:
        with pytest.raises(UserInputError, match=f"cannot listen on 127.0.0.1:{port}"):
            ExporterServer(CollectorRegistry(), "127.0.0.1", port)
    finally:
        first.close()


def test_gpu_alerts_runbook_links_open_on_the_exporter(fake, make_collector, serve):
    """A GPU alert's runbook_url is http://<instance>/runbooks/<alert>/; scraped from a standalone
    exporter, that instance is the exporter, which answered 404 for every GPU runbook."""
    import re
    from pathlib import Path

    import yaml
    server = serve(make_collector(fake))
    rules = yaml.safe_load((Path(__file__).resolve().parents[3] / "rules" / "driftloop.rules.yml").read_text())
    gpu = [r for g in rules["groups"] if g["name"] == "driftloop-gpu" for r in g["rules"] if "alert" in r]
    assert gpu
    for rule in gpu:
        url = rule["annotations"]["runbook_url"]
        path = re.sub(r"^https?://[^/]+", "", url.replace("{{ $labels.instance }}", "host"))
        if not path.startswith("/runbooks/"):
            continue   # a fixed docs site (the exporter-down alert has no instance to point at)
        r = httpx.get(server.url + path)
        assert r.status_code == 200 and "<h1>" in r.text, (rule["alert"], r.status_code)
    assert "DriftloopGpuTooHot".lower() in httpx.get(server.url + "/runbooks/").text
    missing = httpx.get(server.url + "/runbooks/nosuchalert/")
    assert missing.status_code == 404 and "No runbook for alert nosuchalert" in missing.text
