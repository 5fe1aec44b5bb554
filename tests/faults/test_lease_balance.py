"""Balancing the models' leases across daemons (``monitor.daemon.runtime.membership``).

The balancer alone against fakes; then, on a real PostgreSQL, the membership count, an election's
``admit`` and ``release``, and three "daemons" in this process (each its own engine, membership,
balancer and six elections) sharing six models: each leads at most ceil(6 / 3) + 1, every model has
exactly one leader (one granted lock in pg_locks), none is left idle, and when one daemon is cut off (its backends
terminated, new connections refused: a partitioned host) its models move to the others within
2 x the lease, still one leader each.
"""
from __future__ import annotations

import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Callable

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from monitor.daemon.runtime.leader import LeaderElection, lock_key
from monitor.daemon.runtime.membership import MEMBER_CLASS, Balancer, Membership, fair_share, lease_quota
from tests.support.postgres import postgres_server  # noqa: F401  (fixture)
from tests.support.waiting import wait_until

LEASE = 2.0
MODELS = [f"model-{i}" for i in range(6)]


# -- the balancer alone --------------------------------------------------------------------------
@dataclass
class FakeLease:
    admit: Callable[[], bool] | None = None
    tried: Callable[[], None] | None = None
    is_leader: bool = False
    leader_since: float | None = None
    released: list[str] = field(default_factory=list)

    def lead(self, since: float) -> FakeLease:
        self.is_leader, self.leader_since = True, since
        return self

    def release(self, why: str) -> None:
        self.released.append(why)
        self.is_leader, self.leader_since = False, None


@dataclass
class FakeMembers:
    live: int | None = 1
    joined: bool = False

    def start(self) -> None:
        self.joined = True

    def stop(self) -> None:
        self.joined = False

    def live_members(self) -> int | None:
        return self.live if self.joined else None


def test_the_share_is_the_ceiling_and_the_quota_one_more():
    assert [fair_share(6, live) for live in (1, 2, 3, 4, 6, 7)] == [6, 3, 2, 2, 1, 1]
    assert [lease_quota(6, live) for live in (1, 2, 3, 4, 6, 7)] == [7, 4, 3, 3, 2, 2]
    assert fair_share(0, 3) == 0 and fair_share(5, 0) == 5  # no members counted: as if one


def test_admits_below_the_share_only_after_a_count():
    members = FakeMembers(live=3)
    leases = [FakeLease() for _ in range(6)]
    balancer = Balancer(members, LEASE, leases)
    assert all(lease.admit.func == balancer.admit for lease in leases)  # the elections ask it
    assert not balancer.admit()  # nothing counted yet
    members.start()
    balancer.tick()
    assert balancer.live == 3
    for lease in leases[:2]:
        assert balancer.admit()
        lease.lead(since=1.0)
    assert not balancer.admit()  # at its share of 2


def test_over_the_quota_releases_the_newest_one_a_tick():
    members = FakeMembers(live=1, joined=True)
    leases = [FakeLease().lead(since=float(i)) for i in range(6)]
    balancer = Balancer(members, LEASE, leases)
    balancer.tick()
    assert not any(lease.released for lease in leases)  # 6 <= 7
    members.live = 3  # two more daemons: share 2, quota 3
    balancer.tick()
    assert [bool(lease.released) for lease in leases] == [False] * 5 + [True]
    balancer.tick()
    balancer.tick()
    assert [bool(lease.released) for lease in leases] == [False] * 3 + [True] * 3
    balancer.tick()  # at the quota: it keeps 3, and takes no fourth
    assert sum(lease.is_leader for lease in leases) == 3 and not balancer.admit()


def test_while_the_members_cannot_be_counted_nothing_is_taken_or_released():
    leases = [FakeLease().lead(since=float(i)) for i in range(6)] + [FakeLease()]
    balancer = Balancer(FakeMembers(live=None), LEASE, leases)
    balancer.tick()
    assert balancer.live is None and not balancer.admit()
    assert not any(lease.released for lease in leases)


def test_elections_added_and_removed_at_run_time_change_the_share():
    balancer = Balancer(FakeMembers(live=2, joined=True), LEASE)
    balancer.tick()
    assert not balancer.admit()  # no models: a share of 0
    first = FakeLease()
    balancer.add(first)
    balancer.add(first)  # once only
    assert balancer.elections() == [first] and balancer.admit()
    first.lead(since=0.0)
    balancer.add(FakeLease())
    assert not balancer.admit()  # 1 of 2 models with 2 daemons
    balancer.remove(first)
    assert balancer.held() == [] and balancer.admit() and first.admit is None


def test_start_joins_and_counts_stop_leaves():
    members = FakeMembers(live=2)
    balancer = Balancer(members, 60.0, [FakeLease()])
    balancer.start()
    try:
        assert members.joined and balancer.live == 2 and balancer.admit()
    finally:
        balancer.stop()
    assert not members.joined and balancer.live is None and not balancer.admit()


def test_on_sqlite_one_member_and_release_keeps_the_model(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'store.db'}")
    membership = Membership(engine, LEASE)
    membership.start()
    assert membership.live_members() == 1 and membership.quota(6) == 7
    calls: list[str] = []
    election = LeaderElection(engine, "m", LEASE, lambda: calls.append("elected"), lambda: calls.append("deposed"),
                              admit=lambda: False)
    election.start()  # one host: always the leader, admitted or not
    election.release("no one else to take it")
    assert election.is_leader and calls == ["elected"]
    election.stop()
    membership.stop()
    engine.dispose()


# -- on PostgreSQL ---------------------------------------------------------------------------------
class Store:
    """The test database, read by an administrator's connection of its own."""

    def __init__(self, server, url: str):
        self.server, self.url = server, url
        self.name = sa.engine.make_url(url).database

    def admin(self) -> psycopg.Connection:
        return psycopg.connect(f"host=127.0.0.1 port={self.server.port} user=postgres dbname={self.name}",
                               autocommit=True)

    def leader_locks(self) -> list[tuple[int, int]]:
        """(key, pid) of every granted leader lock in this database."""
        with self.admin() as conn:
            return conn.execute(
                "SELECT objid::bigint, pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND classid = 0 AND objsubid = 1 "
                "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())").fetchall()

    def terminate(self, pids: set[int]) -> None:
        with self.admin() as conn:
            for pid in pids:
                conn.execute("SELECT pg_terminate_backend(%s)", (pid,))


@pytest.fixture
def store(postgres_server) -> Store:
    return Store(postgres_server, postgres_server.create_database("lease"))


class Node:
    """One "daemon": its own engine (whose backends it remembers, and which can be cut off), a
    membership, a balancer and one election per model."""

    def __init__(self, name: str, url: str, models: list[str], lease: float = LEASE):
        self.name = name
        self.pids: set[int] = set()
        self.cut = False
        self.engine = sa.create_engine(url, poolclass=NullPool)
        sa.event.listen(self.engine, "do_connect", self._refuse_when_cut)
        sa.event.listen(self.engine, "connect", lambda dbapi_conn, _: self.pids.add(dbapi_conn.info.backend_pid))
        self.membership = Membership(self.engine, lease)
        self.balancer = Balancer(self.membership, lease)
        self.elections: dict[str, LeaderElection] = {}
        for model in models:
            election = LeaderElection(self.engine, model, lease, on_elected=lambda: None, on_deposed=lambda: None)
            self.elections[model] = election
            self.balancer.add(election)

    def _refuse_when_cut(self, dialect, conn_rec, cargs, cparams):
        if self.cut:
            raise psycopg.OperationalError(f"{self.name} is cut off from the store")
        return None  # connect as usual

    def start(self) -> Node:
        self.balancer.start()  # joins the members and counts them before any election tries
        for election in self.elections.values():
            election.start()
        return self

    def stop(self) -> None:
        for election in self.elections.values():
            election.stop()
        self.balancer.stop()
        self.engine.dispose()

    def leads(self) -> set[str]:
        return {model for model, election in self.elections.items() if election.is_leader}

    def cut_off(self, store: Store) -> None:
        """A partitioned host: new connections refused, its sessions terminated under it."""
        self.cut = True
        store.terminate(set(self.pids))


def settled(store: Store, nodes: list[Node], models: list[str]) -> dict[str, Node] | None:
    """The leader of each model when every model has exactly one lock holder, held by one of
    ``nodes`` that knows it leads it, and no node leads more than its quota; else None."""
    locks = store.leader_locks()
    keys = [key for key, _ in locks]
    assert len(keys) == len(set(keys)), f"a model with two lock holders: {locks}"
    holder = dict(locks)
    leaders: dict[str, Node] = {}
    for model in models:
        pid = holder.get(lock_key(model))
        owners = [n for n in nodes if pid in n.pids and model in n.leads()]
        if len(owners) != 1 or sum(model in n.leads() for n in nodes) != 1:
            return None
        leaders[model] = owners[0]
    if any(len(n.leads()) > lease_quota(len(models), len(nodes)) for n in nodes):
        return None
    return leaders


def shares(nodes: list[Node]) -> dict[str, int]:
    return {n.name: len(n.leads()) for n in nodes}


def test_membership_counts_the_live_daemons(store):
    a, b = (Membership(sa.create_engine(store.url, poolclass=NullPool), LEASE) for _ in range(2))
    a.start()
    assert a.live_members() == 1
    b.start()
    assert a.live_members() == 2 and b.live_members() == 2 and a.member_id != b.member_id
    with store.admin() as conn:  # in its own key space: two-int form, classid = MEMBER_CLASS
        rows = conn.execute("SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND granted "
                            "AND classid = %s AND objsubid = 2", (MEMBER_CLASS,)).fetchall()
        member_pid = conn.execute("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = %s "
                                  "AND objid = %s", (MEMBER_CLASS, b.member_id)).fetchone()[0]
    assert sorted(r[0] for r in rows) == sorted([a.member_id, b.member_id])
    store.terminate({member_pid})  # b's session is gone: it cannot count, then it joins again
    assert wait_until(lambda: a.live_members() == 1, LEASE, 0.05)
    assert b.live_members() is None
    assert b.quota(6) == lease_quota(6, 2) and a.live_members() == 2  # joined again, as another member
    b.stop()
    assert a.live_members() == 1
    a.stop()


def test_an_election_asks_before_trying_and_rests_after_a_release(store):
    lease = 1.0
    now = [100.0]
    engine_a, engine_b = (sa.create_engine(store.url, poolclass=NullPool) for _ in range(2))
    admitted = threading.Event()
    events: list[str] = []
    a = LeaderElection(engine_a, "m", lease, lambda: events.append("a elected"), lambda: events.append("a deposed"),
                       admit=admitted.is_set, clock=lambda: now[0])
    b = LeaderElection(engine_b, "m", lease, lambda: events.append("b elected"), lambda: events.append("b deposed"))
    with ExitStack() as stack:
        for thing in (engine_a.dispose, engine_b.dispose, a.stop, b.stop):
            stack.callback(thing)
        a.start()
        assert not a.is_leader and store.leader_locks() == []  # not admitted: did not even try
        admitted.set()
        wait_until(lambda: a.is_leader, lease, 0.02)
        assert a.leader_since == 100.0
        b.start()
        assert not b.is_leader
        admitted.clear()  # not asked while holding
        time.sleep(lease)  # an interval under observation: two of a's checks
        assert a.is_leader
        admitted.set()
        a.release("handing it over")
        assert not a.is_leader and a.leader_since is None
        wait_until(lambda: b.is_leader, lease, 0.02)
        b.release("handing it back")
        time.sleep(lease * 0.75)  # a's clock has not moved: it is still resting, so nobody leads
        assert not a.is_leader and store.leader_locks() == []
        now[0] += lease
        wait_until(lambda: a.is_leader, lease, 0.02)
    assert events == ["a elected", "a deposed", "b elected", "b deposed", "a elected", "a deposed"]


@pytest.mark.slow
def test_three_daemons_share_six_models_and_a_cut_off_daemons_move_within_two_leases(store):
    with ExitStack() as stack:
        nodes: list[Node] = []
        for name in ("a", "b", "c"):
            node = Node(name, store.url, MODELS)
            stack.callback(node.stop)
            nodes.append(node.start())
            if name == "a":
                assert len(node.leads()) == len(MODELS)  # alone at first, it takes them all; then it sheds

        leaders = wait_until(lambda: settled(store, nodes, MODELS), 10 * LEASE, 0.1,
                             lambda: f"not balanced: {shares(nodes)}, locks {store.leader_locks()}")
        print(f"\nbalanced: {shares(nodes)} (share {fair_share(len(MODELS), 3)}, quota {lease_quota(len(MODELS), 3)})")
        assert all(n.leads() for n in nodes)  # a released model goes where there is room: none is idle
        time.sleep(LEASE)  # an interval under observation, not a synchronisation: it stays so
        assert settled(store, nodes, MODELS) == leaders

        victim = max(nodes, key=lambda n: len(n.leads()))
        moved = victim.leads()
        survivors = [n for n in nodes if n is not victim]
        victim.cut_off(store)
        started = time.monotonic()
        after = wait_until(lambda: settled(store, survivors, MODELS), 2 * LEASE + 1, 0.05,
                           lambda: f"not moved: {shares(survivors)}, locks {store.leader_locks()}")
        took = time.monotonic() - started
        print(f"{len(moved)} models of a cut-off daemon moved in {took:.2f} s (lease {LEASE:g} s): {shares(survivors)}")
        assert took <= 2 * LEASE
        assert all(after[model] is not victim for model in MODELS)
        assert all(after[model] is leaders[model] for model in MODELS if model not in moved)  # nothing else moved
        wait_until(lambda: not victim.leads(), LEASE, 0.05)  # the cut-off one has noticed and stepped down
        wait_until(lambda: victim.balancer.live is None, LEASE, 0.05)  # and, unable to count, takes nothing
        time.sleep(LEASE)
        assert settled(store, survivors, MODELS) == after
