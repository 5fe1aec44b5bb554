"""``driftloop serve``'s body: the daemon with its HTTP server, until SIGTERM or SIGINT.

uvicorn runs in a thread on a socket bound here first (so "address in use" is a one-line
error, not a traceback), and the main thread owns the signals. Its connections are bounded by
``monitor.ingest.server`` (header and idle timeouts, a connection cap) and every request's store
calls by ``store.request_wait_seconds``. With ``server.health_port``, ``/livez`` is also answered on
that port by a child process fed a beat from the event loop (``monitor.ingest.liveness``). Shutdown order: stop taking
requests, stop the scheduler (a running check finishes), abort a running retrain (settled
against the registry), close the GPU collector and the store.
"""
from __future__ import annotations

import ipaddress
import logging
import signal
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

from monitor.config import DriftloopConfig
from monitor.errors import UserInputError
from monitor.ingest.liveness import BEAT_SECONDS, LivenessListener
from monitor.ingest.server import BoundedStoreWait, ConnectionLimits, protocol_class, raise_open_file_limit

if TYPE_CHECKING:
    from monitor.daemon.runtime.daemon import Daemon

log = logging.getLogger(__name__)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UserInputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.listen(2048)
    sock.set_inheritable(False)
    return sock


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(cfg: DriftloopConfig, stop: threading.Event | None = None, *, daemon: Daemon | None = None,
          ready: threading.Event | None = None, scheduler: bool = True, freeze_heap: bool = False) -> None:
    """Run until ``stop`` is set (the CLI sets it from SIGTERM/SIGINT). ``daemon``: an already
    built :class:`~monitor.daemon.runtime.daemon.Daemon` (tests, the demo); stopped on the way out.
    ``ready`` is set once requests are answered and the scheduler runs. ``freeze_heap``: freeze the
    startup heap, and the check path after the first check with a champion
    (:mod:`monitor.daemon.runtime.heap`), for a process that is the daemon alone (``driftloop
    serve``), not one that hosts it among other work."""
    import uvicorn

    from monitor.daemon.runtime.daemon import Daemon

    stop = stop or threading.Event()
    if not cfg.server.token and not _loopback(cfg.server.host):
        log.warning("listening on %s without server.token: anyone who can reach it may write predictions, "
                    "labels and retrain requests; set server.token (DRIFTLOOP_SERVER__TOKEN)", cfg.server.host)
    sock = _bind(cfg.server.host, cfg.server.port)
    health_sock = None
    try:
        if cfg.server.health_port is not None:
            health_sock = _bind(cfg.server.host, cfg.server.health_port)
        daemon = daemon if daemon is not None else Daemon(cfg)
    except BaseException:
        sock.close()
        if health_sock is not None:
            health_sock.close()
        raise
    server = None
    thread = None
    liveness = None
    try:
        app = BoundedStoreWait(daemon.build_app(), cfg.store.request_wait_seconds)
        limits = ConnectionLimits(cfg.server.header_timeout_seconds, cfg.server.idle_timeout_seconds,
                                  cfg.server.max_connections)
        raise_open_file_limit(limits.max_connections)
        server = uvicorn.Server(uvicorn.Config(app, http=protocol_class(limits), log_config=None, access_log=False,
                                               timeout_keep_alive=limits.idle_timeout,  # type: ignore[arg-type]
                                               timeout_graceful_shutdown=10, proxy_headers=False,
                                               server_header=False))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="http", daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not server.started:
            raise RuntimeError("the HTTP server did not start; see the log above")
        if health_sock is not None:
            liveness = LivenessListener(health_sock, cfg.server.health_stall_seconds)
            liveness.start()
            log.info("liveness listener (pid %s) answering GET /livez on port %s", liveness.pid,
                     health_sock.getsockname()[1])
        daemon.start(scheduler=scheduler)
        host, port = sock.getsockname()[:2]
        log.info("driftloop serving model %r on http://%s:%s (checks every %g s)", cfg.model.name, host, port,
                 cfg.drift.interval_seconds)
        if ready is not None:
            ready.set()
        if freeze_heap:
            from monitor.daemon.runtime.heap import HeapFreezer, freeze_now
            freeze_now()
            daemon.after_check.append(HeapFreezer())
        loop = server.servers[0].get_loop() if server.servers else None
        while not stop.wait(BEAT_SECONDS):
            if not thread.is_alive():
                raise RuntimeError("the HTTP server stopped unexpectedly; see the log above")
            if liveness is not None and loop is not None:
                liveness.check()
                # The beat runs on the event loop: a loop that does not run stops the beats.
                loop.call_soon_threadsafe(liveness.beat)
        log.info("shutting down")
    finally:
        if server is not None and thread is not None:
            server.should_exit = True
            thread.join(15)
        if liveness is not None:
            liveness.stop()
        daemon.stop()
        sock.close()
        if health_sock is not None:
            health_sock.close()
        log.info("stopped")


def install_signal_handlers(stop: threading.Event) -> None:
    def _stop(signum: int, frame: Any) -> None:
        log.info("received %s", signal.Signals(signum).name)
        stop.set()
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
