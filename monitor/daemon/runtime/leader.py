"""Leader election between daemons sharing one PostgreSQL store.

Every ``driftloop serve`` ingests and answers status; only the leader runs the scheduler (checks,
retention, the retrain cron), acts on Alertmanager's webhook and manual retrains, and supervises
the retrain worker. The leader is whoever holds a session-level PostgreSQL advisory lock on a
connection of its own; the lock goes with the connection, so a leader that dies (SIGKILL, a lost
host, its backend terminated) releases it, and a follower, trying every ``lease / 2`` seconds,
takes over. A leader checks its connection as often and steps down when it is gone; the server
is asked to notice a silent client within about ``lease`` seconds (TCP keepalives). Retrain
single-flight is also enforced by the store (a unique index on running attempts), so two leaders
for a moment still cannot run two retrains.

On SQLite (one host) the daemon is always the leader.
"""
from __future__ import annotations

import logging
import threading
import zlib
from typing import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from monitor.errors import UnavailableError

log = logging.getLogger(__name__)

APPLICATION_NAME = "driftloop-leader"


class NotLeaderError(UnavailableError):
    """This daemon is a follower; the leader acts on alerts and retrains (answered 503)."""


def lock_key(model: str) -> int:
    """One leader per model; below 2**31, so pg_locks shows it whole in ``objid``."""
    return zlib.crc32(f"driftloop.leader:{model}".encode()) & 0x7FFFFFFF


class LeaderElection:
    def __init__(self, engine: Engine, model: str, lease_seconds: float,
                 on_elected: Callable[[], None], on_deposed: Callable[[], None]):
        self._engine = engine
        self._key = lock_key(model)
        self._lease = lease_seconds
        self._on_elected = on_elected
        self._on_deposed = on_deposed
        self._single = engine.dialect.name != "postgresql"
        self._conn: Connection | None = None
        self._leader = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def is_leader(self) -> bool:
        return self._leader

    def start(self) -> None:
        if self._single:
            self._become_leader()
            return
        self._tick()
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop competing; a leader steps down (its callbacks run) and releases the lock."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self._lease + 5)
        if self._leader:
            self._step_down("shutting down")
        self._close()

    def _run(self) -> None:
        while not self._stop.wait(self._lease / 2):
            self._tick()

    def _tick(self) -> None:
        if self._leader:
            if not self._still_holding():
                self._step_down("lost the leader lock (its database connection is gone)")
            return
        if self._try_acquire():
            self._become_leader()

    def _try_acquire(self) -> bool:
        try:
            if self._conn is None:
                conn = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
                # Ask the server to notice a silent client within about a lease, releasing the lock.
                idle = max(1, int(self._lease / 2))
                for setting in (f"application_name = '{APPLICATION_NAME}'", f"tcp_keepalives_idle = {idle}",
                                "tcp_keepalives_interval = 1", f"tcp_keepalives_count = {idle}"):
                    conn.exec_driver_sql(f"SET {setting}")
                self._conn = conn
            got = self._conn.exec_driver_sql(f"SELECT pg_try_advisory_lock({self._key})").scalar()
            return bool(got)
        except sa.exc.SQLAlchemyError as exc:
            log.warning("leader election: the store is unavailable: %s", str(getattr(exc, "orig", exc)).strip()[:200])
            self._close()
            return False

    def _still_holding(self) -> bool:
        if self._conn is None:
            return False
        try:
            held = self._conn.exec_driver_sql(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() "
                f"AND granted AND classid = 0 AND objid = {self._key}").scalar()
            return bool(held)
        except sa.exc.SQLAlchemyError:
            self._close()
            return False

    def _become_leader(self) -> None:
        self._leader = True
        log.info("this daemon is the leader: running the scheduler, alert policy and retrain worker")
        try:
            self._on_elected()
        except Exception:
            log.exception("starting the leader's duties failed; stepping down")
            self._step_down("start-up of the leader's duties failed")

    def _step_down(self, why: str) -> None:
        self._leader = False
        (log.info if self._stop.is_set() else log.warning)("no longer the leader: %s", why)
        try:
            self._on_deposed()
        except Exception:
            log.exception("stopping the leader's duties failed")
        self._close()

    def _close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.invalidate()
                self._conn.close()
            except Exception:  # the connection is already broken; nothing to release
                pass
            self._conn = None
