"""A daemon on a shared PostgreSQL store is not the leader of its model before it has won the
election: ``driftloop serve`` answers HTTP (``/metrics``' ``driftloop_daemon_leader``, ``/v1/models``,
the leader-only endpoints) while it is still starting its models, and another daemon may hold the
lease meanwhile. On SQLite (one host) an unstarted daemon acts as the leader, as in-process use expects."""
from __future__ import annotations

import psycopg
import pytest

from monitor.daemon.runtime.leader import lock_key
from tests.support.postgres import postgres_server  # noqa: F401  (session fixture)


@pytest.mark.slow
def test_an_unstarted_daemon_on_postgresql_does_not_claim_a_lease_another_daemon_holds(make_daemon,
                                                                                     postgres_server):
    url = postgres_server.create_database()
    daemon, _ = make_daemon({"store": {"url": url}})
    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as other:  # another daemon leads this model
        assert other.execute("SELECT pg_try_advisory_lock(%s)", (lock_key(daemon.cfg.model.name),)).fetchone()[0]
        assert not daemon.is_leader


def test_an_unstarted_daemon_on_sqlite_acts_as_the_leader(make_daemon):
    daemon, _ = make_daemon()
    assert daemon.is_leader
