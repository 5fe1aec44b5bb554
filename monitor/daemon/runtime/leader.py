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

With many models on several daemons, a ``Balancer`` (``membership.py``) spreads the leases: it
answers ``admit`` (may this daemon take one more model?), asked before each try but never while
holding, and calls ``release`` on a model it leads too many of; a released election rests one
lease before trying again, so another daemon takes the model.

On SQLite (one host) the daemon is always the leader.
"""
from __future__ import annotations

import logging
import threading
import time
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


def open_session(engine: Engine, lease_seconds: float, application_name: str) -> Connection:
    """A connection of its own for session-level advisory locks (AUTOCOMMIT, so no transaction
    holds anything else), on which the server is asked to notice a silent client within about a
    lease (TCP keepalives), releasing the locks of a dead or partitioned daemon."""
    conn = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    try:
        idle = max(1, int(lease_seconds / 2))
        for setting in (f"application_name = '{application_name}'", f"tcp_keepalives_idle = {idle}",
                        "tcp_keepalives_interval = 1", f"tcp_keepalives_count = {idle}"):
            conn.exec_driver_sql(f"SET {setting}")
    except BaseException:
        close_quietly(conn)
        raise
    return conn


def close_quietly(conn: Connection) -> None:
    """Drop a lock connection without returning it to the pool (closing it releases its locks)."""
    try:
        conn.invalidate()
        conn.close()
    except Exception:  # the connection is already broken; nothing to release
        pass


class LockSession:
    """One connection holding the advisory locks of every model this process leads.

    A daemon hosting many models would otherwise hold one PostgreSQL connection per model, leader
    or follower (50 models on 3 daemons: 150 connections, past PostgreSQL's default
    ``max_connections`` of 100). Sharing one session, each model's lock is still its own: taken with
    ``pg_try_advisory_lock(key)``, handed back with ``pg_advisory_unlock(key)``. The connection's
    *generation* changes each time it is reopened: a lock taken on an earlier connection is gone with
    it (the server released it when that connection died), and its election steps down."""

    def __init__(self, engine: Engine, lease_seconds: float, application_name: str = APPLICATION_NAME):
        self._engine = engine
        self._lease = lease_seconds
        self._application_name = application_name
        self._conn: Connection | None = None
        self._lock = threading.Lock()
        self.generation = 0

    def _connection(self) -> Connection:
        if self._conn is None:
            self._conn = open_session(self._engine, self._lease, self._application_name)
            self.generation += 1
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            close_quietly(self._conn)
            self._conn = None

    def try_lock(self, key: int) -> int | None:
        """The generation the lock on ``key`` was taken on, or None (held elsewhere, or no store)."""
        with self._lock:
            try:
                got = self._connection().exec_driver_sql(f"SELECT pg_try_advisory_lock({key})").scalar()
                return self.generation if got else None
            except sa.exc.SQLAlchemyError as exc:
                log.warning("leader election: the store is unavailable: %s",
                            str(getattr(exc, "orig", exc)).strip()[:200])
                self._drop()
                return None

    def holds(self, key: int, generation: int | None) -> bool:
        with self._lock:
            if self._conn is None or generation != self.generation:
                return False
            try:
                held = self._conn.exec_driver_sql(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() "
                    f"AND granted AND classid = 0 AND objid = {key}").scalar()
                return bool(held)
            except sa.exc.SQLAlchemyError:
                self._drop()
                return False

    def unlock(self, key: int, generation: int | None) -> None:
        """Hand back the lock on ``key`` (taken on ``generation``); nothing when that connection is gone."""
        with self._lock:
            if self._conn is None or generation != self.generation:
                return
            try:
                self._conn.exec_driver_sql(f"SELECT pg_advisory_unlock({key})")
            except sa.exc.SQLAlchemyError:
                self._drop()

    def close(self) -> None:
        """Close the connection: the server releases every lock it held."""
        with self._lock:
            self._drop()


class LeaderElection:
    """``admit``: asked before each try for the lock (not while holding it); False skips the try.
    A balancer may set it later (``Balancer.add``). ``clock``: monotonic seconds, for
    ``leader_since`` and the rest after ``release``."""

    def __init__(self, engine: Engine, model: str, lease_seconds: float,
                 on_elected: Callable[[], None], on_deposed: Callable[[], None],
                 admit: Callable[[], bool] | None = None, clock: Callable[[], float] = time.monotonic,
                 session: LockSession | None = None):
        """``session``: the process's shared :class:`LockSession` (a daemon of many models); without
        it the election has a connection of its own, closed when it steps down."""
        self._engine = engine
        self._shared = session is not None
        self._session = session or LockSession(engine, lease_seconds)
        self._generation: int | None = None
        self._model = model
        self._key = lock_key(model)
        self._lease = lease_seconds
        self._on_elected = on_elected
        self._on_deposed = on_deposed
        self.admit = admit
        self.tried: Callable[[], None] | None = None  # told after each admitted try (the balancer)
        self._clock = clock
        self._single = engine.dialect.name != "postgresql"
        self._leader = False
        self._since: float | None = None
        self._resting_until = float("-inf")
        # One tick, release or step-down at a time: the balancer releases from its own thread.
        self._turn = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def is_leader(self) -> bool:
        return self._leader

    @property
    def single(self) -> bool:
        """One host (not PostgreSQL): no other daemon can lead, so this one always does once started."""
        return self._single

    @property
    def leader_since(self) -> float | None:
        """When (``clock``) this daemon last became the leader; None while a follower."""
        return self._since

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
        with self._turn:
            if self._leader:
                self._step_down("shutting down")
            self._close()

    def release(self, why: str) -> None:
        """Step down (the callbacks run, the lock is released) and do not try again for one lease,
        so that another daemon takes the model. On SQLite there is no other daemon: nothing happens."""
        if self._single:
            return
        with self._turn:
            self._resting_until = self._clock() + self._lease
            if self._leader:
                self._step_down(why, planned=True)

    def _run(self) -> None:
        while not self._stop.wait(self._lease / 2):
            self._tick()

    def _tick(self) -> None:
        with self._turn:
            if self._stop.is_set():
                return
            if self._leader:
                if not self._still_holding():
                    self._step_down("lost the leader lock (its database connection is gone)")
                return
            if self._clock() < self._resting_until or not self._admitted():
                return
            try:
                if self._try_acquire():
                    self._become_leader()
            finally:
                tried = self.tried
                if tried is not None:  # the balancer's reservation for this try ends
                    tried()

    def _admitted(self) -> bool:
        admit = self.admit
        if admit is None:
            return True
        try:
            return admit()
        except Exception:  # a bug in the balancer must not stop the election; take nothing new
            log.exception("leader election: asking whether to take the model failed")
            return False

    def _try_acquire(self) -> bool:
        self._generation = self._session.try_lock(self._key)
        return self._generation is not None

    def _still_holding(self) -> bool:
        return self._session.holds(self._key, self._generation)

    def _become_leader(self) -> None:
        self._leader = True
        self._since = self._clock()
        log.info("this daemon is the leader of model %r: running its checks, alert policy and retrain worker",
                 self._model)
        try:
            self._on_elected()
        except Exception:
            log.exception("starting the leader's duties failed; stepping down")
            self._step_down("start-up of the leader's duties failed")

    def _step_down(self, why: str, planned: bool = False) -> None:
        self._leader = False
        self._since = None
        (log.info if planned or self._stop.is_set() else log.warning)("no longer the leader of model %r: %s",
                                                                      self._model, why)
        try:
            self._on_deposed()
        except Exception:
            log.exception("stopping the leader's duties failed")
        self._close()

    def _close(self) -> None:
        if self._shared:
            self._session.unlock(self._key, self._generation)  # the other models keep their locks
        else:
            self._session.close()
        self._generation = None
