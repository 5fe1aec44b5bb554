"""The exporter's HTTP(S) server: ``/metrics``, ``/healthz`` and a landing page at ``/``.

Standard library only (no web framework on a GPU node). ``/metrics`` negotiates the exposition format
like Prometheus expects (OpenMetrics when asked for, else text 0.0.4) and gzips when the scraper
accepts it. TLS handshakes happen in the connection's own thread with a timeout, so a slow or
hostile client cannot stall the accept loop, and concurrent connections are capped.
"""
from __future__ import annotations

import gzip
import html
import json
import logging
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

from prometheus_client import CollectorRegistry
from monitor.errors import UserInputError
from monitor.gpu.exposition import Encoder
from monitor.runbook_pages import answer as runbook_answer

log = logging.getLogger(__name__)

CONNECTION_TIMEOUT_SECONDS = 30.0  # idle keep-alive connections and TLS handshakes give up after this


def tls_context(cert: str | Path, key: str | Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(str(cert), str(key))
    except (OSError, ssl.SSLError) as exc:
        raise UserInputError(f"cannot load TLS certificate {cert} with key {key}: {exc}") from exc
    return ctx


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], handler: type, *, tls: ssl.SSLContext | None, max_connections: int,
                 app: "ExporterServer"):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.tls = tls
        self.app = app
        self._slots = threading.BoundedSemaphore(max_connections)
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            log.warning("too many connections; refusing %s", client_address)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def finish_request(self, request: Any, client_address: Any) -> None:
        request.settimeout(CONNECTION_TIMEOUT_SECONDS)
        if self.tls is not None:
            try:
                request = self.tls.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError) as exc:
                log.debug("TLS handshake with %s failed: %s", client_address, exc)
                return
        super().finish_request(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    server_version = "driftloop-exporter"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log.debug("%s " + format, self.address_string(), *args)

    def _send(self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        app = self.server.app
        if path == "/metrics":
            self._metrics(app)
        elif path == "/healthz":
            body = json.dumps({"status": "ok", **app.health()}).encode()
            self._send(200, body, "application/json")
        elif path == "/":
            self._send(200, app.landing_page().encode(), "text/html; charset=utf-8")
        elif path == "/runbooks" or path.startswith("/runbooks/"):
            self._runbook(path[len("/runbooks/"):].strip("/"))
        else:
            self._send(404, b"not found: try /metrics\n", "text/plain; charset=utf-8")

    do_HEAD = do_GET

    def _runbook(self, alert: str) -> None:
        """The alerts' runbooks, as the daemon serves them: a GPU alert's ``runbook_url`` is
        ``http://<instance>/runbooks/<alert>/``, and for the exporter's own series that instance is this."""
        status, page, headers = runbook_answer(alert)
        self._send(status, page.encode(), "text/html; charset=utf-8", headers)

    def _refuse(self) -> None:
        self.close_connection = True  # the request body is not read, so the connection cannot be reused
        self._send(405, b"method not allowed: the exporter is read-only\n", "text/plain; charset=utf-8",
                   {"Allow": "GET, HEAD", "Connection": "close"})

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse

    def _metrics(self, app: "ExporterServer") -> None:
        try:
            body, content_type = app.encoder.encode(app.registry, self.headers.get("Accept", ""))
        except Exception:  # a bug in a collector: answer 500 and keep serving
            log.exception("building /metrics failed")
            self._send(500, b"collecting metrics failed; see the exporter's log\n", "text/plain; charset=utf-8")
            return
        extra = {}
        if "gzip" in self.headers.get("Accept-Encoding", ""):
            body = gzip.compress(body, compresslevel=5)
            extra["Content-Encoding"] = "gzip"
        self._send(200, body, content_type, extra)


class ExporterServer:
    """Serves ``registry`` on ``host:port`` (``port`` 0 picks a free one; see ``.port``)."""

    def __init__(self, registry: CollectorRegistry, host: str = "127.0.0.1", port: int = 9471, *,
                 tls_cert: str | Path | None = None, tls_key: str | Path | None = None,
                 health: Callable[[], dict[str, Any]] | None = None, title: str = "driftloop GPU exporter",
                 max_connections: int = 64, poll_interval: float = 0.5):
        self.registry = registry
        self.encoder = Encoder()
        self._health = health or (lambda: {})
        self.title = title
        tls = tls_context(tls_cert, tls_key) if tls_cert and tls_key else None
        try:
            self._server = _Server((host, port), _Handler, tls=tls, max_connections=max_connections, app=self)
        except OSError as exc:
            raise UserInputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
        self.host = host
        self.port = self._server.server_address[1]
        self.scheme = "https" if tls else "http"
        self._thread: threading.Thread | None = None
        self._poll_interval = poll_interval  # how soon close() is noticed; idle wake-ups cost CPU

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def health(self) -> dict[str, Any]:
        return self._health()

    def landing_page(self) -> str:
        title = html.escape(self.title)
        return (f"<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1>"
                '<p><a href="/metrics">Metrics</a> &middot; <a href="/healthz">Health</a></p></body></html>\n')

    def start(self) -> "ExporterServer":
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": self._poll_interval},
                                        name="exporter-http", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(5)
        self._server.server_close()
