"""Balancing the models' leases across the daemons sharing one PostgreSQL store.

Each model has its own lease (``LeaderElection``, an advisory lock per model). With many models
and several ``driftloop serve``, one daemon could take them all; instead a daemon tries for a model
only while it leads fewer than ``ceil(models / live daemons)`` (``fair_share``), and one leading
more than that + 1 (``lease_quota``) releases the excess, one model a tick (``Balancer``).

Who is live is itself a lock: every daemon holds a session-level advisory lock in a key space of its
own (``pg_advisory_lock(MEMBER_CLASS, member id)``, the two-int form, so pg_locks shows
``classid = MEMBER_CLASS``, ``objsubid = 2``, never a leader's key: those have ``classid = 0``) on a
connection of its own with the leader's TCP keepalives, so a dead daemon drops out of the count
within about a lease, as its models' locks go. Counting the granted ones in the current database
is counting the live daemons; no table, no heartbeat rows to expire.

A dead daemon's models move within 2 x the lease: its locks go within about a lease (at once when
its backend is terminated), the others count one member fewer within half a lease, and their
elections try every half lease.

On SQLite (one host) there is one member, and the quota never binds.
"""
from __future__ import annotations

import logging
import math
import random
import threading
import time
from functools import partial
from typing import Callable, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from monitor.daemon.runtime.leader import close_quietly, open_session

log = logging.getLogger(__name__)

MEMBER_CLASS = 0x64726966  # "drif": any nonzero int4 keeps members apart from the leaders' keys
APPLICATION_NAME = "driftloop-member"
_JOIN_TRIES = 5


def fair_share(models: int, live: int) -> int:
    """``ceil(models / live)``: a daemon takes a model while it leads fewer."""
    return math.ceil(models / max(1, live))


def lease_quota(models: int, live: int) -> int:
    """``fair_share + 1``: the most models a daemon leads; over it, it releases one a tick."""
    return fair_share(models, live) + 1


class Membership:
    """This daemon's membership, and the count of live members (``None`` while it cannot count)."""

    def __init__(self, engine: Engine, lease_seconds: float,
                 draw_id: Callable[[], int] = lambda: random.randrange(1, 2**31)):
        self._engine = engine
        self._lease = lease_seconds
        self._draw_id = draw_id
        self._single = engine.dialect.name != "postgresql"
        self._conn: Connection | None = None
        self.member_id: int | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Join; a store that is down is tried again on the next count."""
        if not self._single:
            with self._lock:
                self._join()

    def stop(self) -> None:
        """Leave at once: unlocked before the connection is dropped, so the others' next count,
        not the server's noticing the closed socket, is the moment it is gone."""
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.exec_driver_sql(f"SELECT pg_advisory_unlock({MEMBER_CLASS}, {self.member_id})")
                except sa.exc.SQLAlchemyError:
                    pass  # the connection is broken: its lock goes with it
            self._close()

    def live_members(self) -> int | None:
        """The daemons holding a membership lock in this database, this one included; None while
        this daemon is not a member (its connection lost: it re-joins on the next call)."""
        if self._single:
            return 1
        with self._lock:
            if self._conn is None and not self._join():
                return None
            assert self._conn is not None
            try:
                live = self._conn.exec_driver_sql(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                    f"AND classid = {MEMBER_CLASS} AND objsubid = 2 "
                    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())").scalar()
            except sa.exc.SQLAlchemyError as exc:
                log.warning("membership: lost the store, not counting the daemons: %s", _reason(exc))
                self._close()
                return None
            return max(1, int(live or 0))

    def quota(self, models: int) -> int | None:
        """The most of ``models`` this daemon may lead now; None while it cannot count."""
        live = self.live_members()
        return None if live is None else lease_quota(models, live)

    def _join(self) -> bool:
        try:
            conn = open_session(self._engine, self._lease, APPLICATION_NAME)
        except sa.exc.SQLAlchemyError as exc:
            log.warning("membership: the store is unavailable: %s", _reason(exc))
            return False
        try:
            for _ in range(_JOIN_TRIES):  # a random 31-bit id is taken only by a rare collision
                member_id = self._draw_id()
                if conn.exec_driver_sql(f"SELECT pg_try_advisory_lock({MEMBER_CLASS}, {member_id})").scalar():
                    self._conn, self.member_id = conn, member_id
                    return True
        except sa.exc.SQLAlchemyError as exc:
            log.warning("membership: the store is unavailable: %s", _reason(exc))
        else:
            log.error("membership: %d member ids in a row were taken", _JOIN_TRIES)
        close_quietly(conn)
        return False

    def _close(self) -> None:
        if self._conn is not None:
            close_quietly(self._conn)
            self._conn = None
            self.member_id = None


def _reason(exc: sa.exc.SQLAlchemyError) -> str:
    return str(getattr(exc, "orig", exc)).strip()[:200]


class Lease(Protocol):
    """What the balancer needs of a model's election (``LeaderElection``)."""

    admit: Callable[[], bool] | None
    tried: Callable[[], None] | None

    @property
    def is_leader(self) -> bool: ...

    @property
    def leader_since(self) -> float | None: ...

    def release(self, why: str) -> None: ...


class Members(Protocol):
    """What the balancer needs of the membership (``Membership``)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def live_members(self) -> int | None: ...


class Balancer:
    """Keeps this daemon's share of the models' leases: it takes a model while it leads fewer than
    ``fair_share`` and releases one while it leads more than ``lease_quota`` (the share + 1).

    The gap between the two is hysteresis: a released model is never taken by a daemon already at
    its share, so it lands where there is room and stays, instead of bouncing between full daemons
    (each move stops a scheduler and may interrupt a retrain); and one daemon joining or leaving
    does not make every other one shed a model. Started one after another, three daemons with six
    models settle at 3/2/1 or 2/2/2, never 3/3/0.

    It owns the membership: ``start`` joins and counts once, so start it before the elections
    (until the first count ``admit`` says no); ``stop`` leaves. ``add`` an election (it sets the
    election's ``admit``) before starting it, and ``remove`` it when its model goes (models added
    or removed on reload); an election started before it is added takes its first try unasked.
    Every ``lease / 2`` seconds it counts the members and, while over the quota, releases the model
    it took most recently (one a tick). While the members cannot be counted it takes nothing new
    and releases nothing.

    An admitted election's reservation counts as a taken model until its try is over, so elections
    asking at the same instant never take more than the share together.
    """

    def __init__(self, membership: Members, lease_seconds: float, elections: list[Lease] | None = None):
        self._membership = membership
        self._lease = lease_seconds
        self._elections: list[Lease] = []
        self._lock = threading.Lock()  # guards the list only; never held while calling an election
        self._admitting = threading.Lock()
        self._reserved: dict[Lease, float] = {}  # admitted elections whose try is not over: when admitted
        self._live: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        for election in elections or []:
            self.add(election)

    @property
    def live(self) -> int | None:
        """The daemons counted at the latest tick; None before it or while they cannot be counted."""
        return self._live

    def add(self, election: Lease) -> None:
        with self._lock:
            if election not in self._elections:
                self._elections.append(election)
        election.admit = partial(self.admit, election)
        election.tried = partial(self.tried, election)

    def remove(self, election: Lease) -> None:
        with self._lock:
            if election in self._elections:
                self._elections.remove(election)
        if getattr(election.admit, "func", None) == self.admit:
            election.admit = None

    def elections(self) -> list[Lease]:
        with self._lock:
            return list(self._elections)

    def held(self) -> list[Lease]:
        return [e for e in self.elections() if e.is_leader]

    def admit(self, election: Lease | None = None) -> bool:
        """May this daemon take one more model? (``election`` asks before trying; ``add`` binds it)

        An admitted election holds a reservation until its try is over (:meth:`tried`) or a lease
        passes: elections asking at the same instant never take more than the share together."""
        live = self._live
        if live is None:
            return False
        elections = self.elections()
        with self._admitting:
            now = time.monotonic()
            self._reserved = {e: t for e, t in self._reserved.items() if not e.is_leader and now - t < self._lease}
            if sum(e.is_leader for e in elections) + len(self._reserved) >= fair_share(len(elections), live):
                return False
            if election is not None:
                self._reserved[election] = now
            return True

    def tried(self, election: Lease) -> None:
        """``election``'s try is over (it leads now, or another daemon does): its reservation ends."""
        with self._admitting:
            self._reserved.pop(election, None)

    def start(self) -> None:
        """Join the members and count them (a store that is down: on a later tick), then keep
        balancing every half lease."""
        self._stop.clear()
        self._membership.start()
        self.tick()
        self._thread = threading.Thread(target=self._run, name="lease-balancer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop balancing and leave the members (the elections keep what they lead until stopped)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self._lease + 5)
            self._thread = None
        self._live = None
        self._membership.stop()

    def _run(self) -> None:
        while not self._stop.wait(self._lease / 2):
            try:
                self.tick()
            except Exception:  # a bug here must not end the balancing; take nothing new meanwhile
                self._live = None
                log.exception("balancing the models' leases failed")

    def tick(self) -> None:
        """Count the members; release the newest model while over the quota."""
        self._live = live = self._membership.live_members()
        elections = self.elections()
        held = [e for e in elections if e.is_leader]
        if live is None or len(held) <= (cap := lease_quota(len(elections), live)):
            return
        newest = max(held, key=lambda e: e.leader_since or 0.0)
        log.info("leading %d models, over this daemon's quota of %d: handing one to another daemon", len(held), cap)
        newest.release(f"over this daemon's quota of the models ({len(held)} > {cap})")
