"""``/livez`` on a port of its own (``server.health_port``), answered by a small child process that
no request load, connection cap, worker pool or garbage collection of the daemon can hold up.

Why a process and not a thread. The daemon's ``/livez`` on its main port is answered on the event
loop, and the loop shares one GIL with everything else the daemon does: during a burst of 96 large
bodies orjson, validation and full collections held the GIL for seconds at a time and ``/livez``
took 3.6-10.5 s; with 600 keep-alive clients at the connection cap, probes were refused. A thread
with its own socket still needs that GIL (orjson holds it for a whole 31 MiB parse); a process does
not. This one imports nothing but the standard library (it is started as a script with ``-I -S``,
~20 ms and ~10 MiB), answers from ``selectors`` on the socket the daemon bound for it, and knows one
thing: when the daemon's HTTP event loop last ran.

What it answers. The daemon's event loop writes a byte to a pipe every second (``beat``). ``GET
/livez`` is 200 while the last byte is at most ``stall_seconds`` old, 503 after (a loop stalled
that long is hung, not busy: the longest stall measured under a body burst was ~10 s), and the
process exits when the pipe closes (the daemon died), so the port stops answering. Any other path
is 404. The daemon starts a new child if this one dies (:meth:`LivenessListener.check`).

Layers: stdlib only; the parent side (:class:`LivenessListener`) is used by
``monitor.daemon.runtime.serve``.
"""
from __future__ import annotations

import argparse
import logging
import os
import selectors
import socket
import subprocess
import sys
import time

log = logging.getLogger(__name__)

# Connections the child holds at once (a probe needs one, for milliseconds); more close the oldest.
MAX_CONNECTIONS = 64
# Time a connection has to send its request head.
HEAD_SECONDS = 2.0
MAX_HEAD_BYTES = 8192
BEAT_SECONDS = 1.0


def _response(status: str, body: bytes) -> bytes:
    return (f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            "cache-control: no-store\r\nconnection: close\r\n\r\n").encode() + body


_OK = _response("200 OK", b'{"status": "ok"}')
_STALLED = _response("503 Service Unavailable",
                     b'{"status": "unavailable", "error": "the daemon\'s event loop has not run for '
                     b'server.health_stall_seconds"}')
_NOT_FOUND = _response("404 Not Found", b'{"error": "only GET /livez is served on this port"}')
_BAD = _response("400 Bad Request", b'{"error": "not an HTTP request head"}')


def answer(head: bytes, stalled: bool) -> bytes:
    """The response to one request head (the bytes up to its blank line)."""
    line = head.split(b"\r\n", 1)[0].split()
    if len(line) != 3 or not line[2].startswith(b"HTTP/"):
        return _BAD
    method, target = line[0], line[1].split(b"?", 1)[0]
    if method not in (b"GET", b"HEAD") or target != b"/livez":
        return _NOT_FOUND
    out = _STALLED if stalled else _OK
    return out.split(b"\r\n\r\n", 1)[0] + b"\r\n\r\n" if method == b"HEAD" else out


class _Probe:
    __slots__ = ("sock", "head", "deadline")

    def __init__(self, sock: socket.socket, deadline: float):
        self.sock = sock
        self.head = b""
        self.deadline = deadline


def run(listener: socket.socket, beats: int, stall_seconds: float) -> None:
    """The child's loop: until the daemon closes its end of ``beats``."""
    listener.setblocking(False)
    os.set_blocking(beats, False)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, None)
    sel.register(beats, selectors.EVENT_READ, None)
    probes: dict[int, _Probe] = {}  # oldest first
    last_beat = time.monotonic()

    def close(probe: _Probe) -> None:
        probes.pop(probe.sock.fileno(), None)
        sel.unregister(probe.sock)
        probe.sock.close()

    while True:
        now = time.monotonic()
        wait = min((p.deadline for p in probes.values()), default=now + BEAT_SECONDS) - now
        for key, _ in sel.select(max(0.0, wait)):
            now = time.monotonic()
            if key.fd == beats:
                try:
                    if not os.read(beats, 4096):
                        return  # the daemon is gone: stop answering
                except BlockingIOError:
                    continue
                last_beat = now
            elif key.fileobj is listener:
                for _ in range(MAX_CONNECTIONS):
                    try:
                        conn, _addr = listener.accept()
                    except (BlockingIOError, InterruptedError):
                        break
                    except OSError:  # out of descriptors, a reset before accept: try later
                        break
                    if len(probes) >= MAX_CONNECTIONS:
                        close(next(iter(probes.values())))
                    conn.setblocking(False)
                    probes[conn.fileno()] = _Probe(conn, now + HEAD_SECONDS)
                    sel.register(conn, selectors.EVENT_READ, None)
            else:
                probe = probes.get(key.fd)
                if probe is None:
                    continue
                try:
                    data = probe.sock.recv(4096)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                if not data:
                    close(probe)
                    continue
                probe.head += data
                end = probe.head.find(b"\r\n\r\n")
                if end < 0 and len(probe.head) < MAX_HEAD_BYTES:
                    continue
                reply = answer(probe.head[:end] if end >= 0 else b"", now - last_beat > stall_seconds)
                try:
                    probe.sock.send(reply)  # a few hundred bytes: a fresh socket's buffer takes them whole
                except OSError:
                    pass
                close(probe)
        now = time.monotonic()
        for probe in [p for p in probes.values() if p.deadline <= now]:
            close(probe)


class LivenessListener:
    """The daemon's side: binds nothing (``serve`` binds ``sock``, so "address in use" is its one-line
    error), starts the child on it, feeds it beats, and stops it."""

    def __init__(self, sock: socket.socket, stall_seconds: float):
        self.sock = sock
        self.stall_seconds = stall_seconds
        self._proc: subprocess.Popen[bytes] | None = None
        self._beat_fd: int | None = None

    def start(self) -> None:
        read_fd, write_fd = os.pipe()
        try:
            # -I -S: no user site, no site-packages, no PYTHON* variables: the standard library only.
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", os.path.abspath(__file__), "--listen-fd", str(self.sock.fileno()),
                 "--beat-fd", str(read_fd), "--stall-seconds", repr(self.stall_seconds)],
                pass_fds=(self.sock.fileno(), read_fd), stdin=subprocess.DEVNULL)
        finally:
            os.close(read_fd)
        os.set_blocking(write_fd, False)
        self._beat_fd = write_fd

    def beat(self) -> None:
        """Called on the daemon's event loop every :data:`BEAT_SECONDS`."""
        fd = self._beat_fd
        if fd is None:
            return
        try:
            os.write(fd, b".")
        except (BlockingIOError, BrokenPipeError, OSError):
            pass  # a full pipe already says "alive"; a dead child is check()'s business

    def check(self) -> None:
        """Start a new child if this one died (its port would stop answering)."""
        if self._proc is not None and self._proc.poll() is not None:
            log.warning("the liveness listener exited with %s; starting it again", self._proc.returncode)
            self._close_pipe()
            self.start()

    def stop(self) -> None:
        self._close_pipe()  # the child exits on EOF
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.wait(2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _close_pipe(self) -> None:
        if self._beat_fd is not None:
            os.close(self._beat_fd)
            self._beat_fd = None


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="driftloop's liveness listener (started by driftloop serve)")
    p.add_argument("--listen-fd", type=int, required=True)
    p.add_argument("--beat-fd", type=int, required=True)
    p.add_argument("--stall-seconds", type=float, required=True)
    args = p.parse_args(argv)
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the daemon, which closes the pipe
    run(socket.socket(fileno=args.listen_fd), args.beat_fd, args.stall_seconds)


if __name__ == "__main__":
    main()
