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
from typing import TYPE_CHECKING, Any, Callable

from monitor.config import DriftloopConfig
from monitor.errors import UserInputError
from monitor.ingest.liveness import BEAT_SECONDS, LivenessListener
from monitor.ingest.server import BoundedStoreWait, ConnectionLimits, protocol_class, raise_open_file_limit

if TYPE_CHECKING:
    from monitor.daemon.runtime.daemon import Daemon
    from monitor.daemon.runtime.fleet import Fleet
    from monitor.daemon.runtime.fleet_http import FleetApp

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
          ready: threading.Event | None = None, scheduler: bool = True, freeze_heap: bool = False,
          prepare: Callable[[DriftloopConfig], DriftloopConfig] | None = None,
          reload: threading.Event | None = None,
          reload_config: Callable[[], DriftloopConfig] | None = None, fleet: Fleet | None = None) -> None:
    """Run until ``stop`` is set (the CLI sets it from SIGTERM/SIGINT). ``daemon``: an already
    built :class:`~monitor.daemon.runtime.daemon.Daemon` (tests, the demo); stopped on the way out.
    ``ready`` is set once requests are answered and the scheduler runs. ``freeze_heap``: freeze the
    startup heap, and the check path after the first check with a champion
    (:mod:`monitor.daemon.runtime.heap`), for a process that is the daemon alone (``driftloop
    serve``), not one that hosts it among other work.

    Every model of ``cfg`` is served (:class:`~monitor.daemon.runtime.fleet.Fleet`; ``prepare`` turns
    each model's configuration into the one it runs with). While ``reload`` is set (SIGHUP),
    ``reload_config()`` is read and applied: models added start, models removed stop, the others
    are not touched."""
    import uvicorn

    from monitor.daemon.runtime.fleet import Fleet
    from monitor.daemon.runtime.fleet_http import FleetApp

    stop = stop or threading.Event()
    if not cfg.server.token and not _loopback(cfg.server.host):
        log.warning("listening on %s without server.token: anyone who can reach it may write predictions, "
                    "labels and retrain requests; set server.token (DRIFTLOOP_SERVER__TOKEN)", cfg.server.host)
    sock = _bind(cfg.server.host, cfg.server.port)
    health_sock = None
    try:
        if cfg.server.health_port is not None:
            health_sock = _bind(cfg.server.host, cfg.server.health_port)
        if fleet is None:
            fleet = Fleet(cfg, daemons={cfg.model.name: daemon}) if daemon is not None else Fleet(cfg, prepare=prepare)
    except BaseException:
        sock.close()
        if health_sock is not None:
            health_sock.close()
        raise
    server = None
    thread = None
    liveness = None
    try:
        routes = FleetApp(fleet)
        app = BoundedStoreWait(routes, cfg.store.request_wait_seconds)
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
        fleet.start(scheduler=scheduler)
        host, port = sock.getsockname()[:2]
        if len(fleet.daemons) == 1 and not fleet.failed:
            only = next(iter(fleet.daemons.values())).cfg
            log.info("driftloop serving model %r on http://%s:%s (checks every %g s)", only.model.name, host, port,
                     only.drift.interval_seconds)
        else:
            log.info("driftloop serving %d models on http://%s:%s: %s%s", len(fleet.daemons), host, port,
                     ", ".join(fleet.names), f" (not running: {', '.join(fleet.failed)})" if fleet.failed else "")
        if ready is not None:
            ready.set()
        if freeze_heap:
            from monitor.daemon.runtime.heap import HeapFreezer, freeze_now
            freeze_now()
            freezer = HeapFreezer()
            for hosted in fleet.daemons.values():
                hosted.after_check.append(freezer)
        loop = server.servers[0].get_loop() if server.servers else None
        while not stop.wait(BEAT_SECONDS):
            if not thread.is_alive():
                raise RuntimeError("the HTTP server stopped unexpectedly; see the log above")
            if reload is not None and reload.is_set() and reload_config is not None:
                reload.clear()
                _reload(fleet, routes, reload_config)
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
        if fleet is not None:
            fleet.stop()
        sock.close()
        if health_sock is not None:
            health_sock.close()
        log.info("stopped")


def _reload(fleet: Fleet, routes: FleetApp, reload_config: Callable[[], DriftloopConfig]) -> None:
    """Apply the configuration as it is now; a configuration that does not load changes nothing."""
    try:
        cfg = reload_config()
    except Exception as exc:
        log.error("reload: the configuration was not applied, every model keeps running as it was: %s", exc)
        return
    fleet.reload(cfg)
    routes.refresh()


def install_signal_handlers(stop: threading.Event, reload: threading.Event | None = None) -> None:
    def _stop(signum: int, frame: Any) -> None:
        log.info("received %s", signal.Signals(signum).name)
        stop.set()

    def _reload(signum: int, frame: Any) -> None:
        log.info("received SIGHUP: reloading the configuration")
        if reload is not None:
            reload.set()
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    if reload is not None:
        signal.signal(signal.SIGHUP, _reload)
