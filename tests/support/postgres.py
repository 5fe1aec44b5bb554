"""Start a private, throw-away PostgreSQL (Debian package `postgresql`) on 127.0.0.1 for tests.

One server per test session (``initdb`` into a fresh folder, ``postgres`` on a free port, trust
auth, durability switched off because the data is disposable); each test gets its own database.
PostgreSQL refuses to run as root, so as root the folder is handed to the ``postgres`` user and
initdb and the server run as that user (``subprocess``'s ``user=``/``group=``).

    from tests.support.postgres import postgres_server  # noqa: F401  (in a conftest.py)
    def test_x(postgres_server): url = postgres_server.create_database()  # postgresql+psycopg://...
"""
from __future__ import annotations

import atexit
import glob
import itertools
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.services import free_port
from tests.support.waiting import wait_until

_SERVER_USER = "postgres"


def _missing(what: str) -> None:
    # In CI scripts/setup.sh installs PostgreSQL; a silent skip there would hide a broken set-up.
    if os.environ.get("CI"):
        pytest.fail(f"{what} (scripts/setup.sh installs PostgreSQL)")
    pytest.skip(f"{what}; install the Debian package `postgresql` to run these tests")


def find_bindir() -> Path | None:
    """Where initdb/postgres live: $PG_BINDIR, then PATH, then Debian's versioned folders."""
    if os.environ.get("PG_BINDIR"):
        return Path(os.environ["PG_BINDIR"])
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    return Path(candidates[-1]).parent if candidates else None


@dataclass
class PostgresServer:
    port: int
    datadir: Path
    proc: subprocess.Popen
    _counter: itertools.count = field(default_factory=lambda: itertools.count(1))

    @property
    def admin_url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, prefix: str = "t") -> str:
        """A fresh, empty database; returns its SQLAlchemy URL."""
        import psycopg

        name = f"{prefix}_{os.getpid()}_{next(self._counter)}"
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres",
                             autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM = "smart" shutdown; fine, clients are gone by now
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        shutil.rmtree(self.datadir.parent, ignore_errors=True)


def _server_user_kwargs() -> dict:
    """Popen arguments that run the child as the ``postgres`` user when we are root."""
    if os.geteuid() != 0:
        return {}
    return {"user": _SERVER_USER, "group": _SERVER_USER, "extra_groups": []}


def _die_with_parent() -> None:
    # Runs in the child after the switch to the postgres user (a later uid change would clear it):
    # if the test process dies without cleaning up, the server gets SIGTERM instead of lingering.
    import ctypes
    import signal
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def start_postgres(timeout: float = 60.0, durable: bool = False) -> PostgresServer:
    """``durable``: keep PostgreSQL's default fsync and synchronous commit (benchmarks); tests
    switch them off, the data being disposable."""
    bindir = find_bindir()
    if bindir is None or not (bindir / "postgres").exists():
        _missing("PostgreSQL server binaries (initdb, postgres) not found")
    try:
        import psycopg
    except ImportError:
        _missing("psycopg is not installed")
    # Not under pytest's tmp_path: its parents are private to root, and the server runs as postgres.
    base = Path(tempfile.mkdtemp(prefix="driftloop-pg-"))
    datadir = base / "data"
    datadir.mkdir()
    if os.geteuid() == 0:
        shutil.chown(base, _SERVER_USER)
        shutil.chown(datadir, _SERVER_USER)
    init = subprocess.run(
        [str(bindir / "initdb"), "-D", str(datadir), "-U", "postgres", "--auth=trust", "--no-sync",
         "-E", "UTF8", "--locale=C"],
        capture_output=True, text=True, cwd=base, **_server_user_kwargs())
    if init.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {init.stdout[-1500:]}{init.stderr[-1500:]}")
    port = free_port()
    log = open(base / "postgres.log", "wb")
    if os.geteuid() == 0:
        shutil.chown(base / "postgres.log", _SERVER_USER)
    proc = subprocess.Popen(
        [str(bindir / "postgres"), "-D", str(datadir), "-h", "127.0.0.1", "-p", str(port),
         "-k", str(datadir),  # unix socket inside the private folder, not /var/run
         *([] if durable else ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]),
         "-c", "max_connections=200", "-c", "shared_buffers=64MB"],
        stdout=log, stderr=subprocess.STDOUT, cwd=base, preexec_fn=_die_with_parent, **_server_user_kwargs())
    def accepts() -> bool:
        if proc.poll() is not None:
            log_text = (base / "postgres.log").read_text(errors="replace")
            shutil.rmtree(base, ignore_errors=True)
            raise RuntimeError(f"postgres exited during start-up: {log_text[-2000:]}")
        with psycopg.connect(f"host=127.0.0.1 port={port} user=postgres dbname=postgres", connect_timeout=2):
            return True

    try:
        wait_until(accepts, timeout, 0.2, ignoring=(psycopg.OperationalError,))
    except AssertionError:
        proc.kill()
        raise RuntimeError(f"postgres did not accept connections within {timeout:.0f} s") from None
    return PostgresServer(port=port, datadir=datadir, proc=proc)


_shared: PostgresServer | None = None


def shared_postgres() -> PostgresServer:
    """The process's one server, started on first use and stopped when the process exits. Test
    folders import ``postgres_server`` into their own conftest; each gets this same server."""
    global _shared
    if _shared is None or _shared.proc.poll() is not None:
        _shared = start_postgres()
        atexit.register(_shared.stop)
    return _shared


@pytest.fixture(scope="session")
def postgres_server() -> PostgresServer:
    """A private PostgreSQL for the session; skipped (failed in CI) when not installed."""
    return shared_postgres()
