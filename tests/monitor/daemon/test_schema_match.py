"""One schema source: the daemon's tables as its migrations create them (frozen DDL in
monitor/daemon/state/schema.py) and as its queries see them (SQLAlchemy Core in monitor/daemon/state/tables.py)
must agree, column by column: name, type, nullability, primary key (issue 14)."""
from __future__ import annotations

import pytest
import sqlalchemy as sa

from monitor.daemon.state import tables
from monitor.store import make_engine, migrate
from tests.support.postgres import postgres_server  # noqa: F401  (session fixture)


@pytest.fixture(params=["sqlite", "postgresql"])
def migrated(request, tmp_path):
    """A store with every migration applied, on each backend (their DDL differs: identity columns)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
    else:
        url = request.getfixturevalue("postgres_server").create_database()
    engine = make_engine(url)
    migrate(engine)
    yield engine
    engine.dispose()


def _kind(column_type: sa.types.TypeEngine) -> type:
    try:
        kind = column_type.python_type
    except NotImplementedError:  # pragma: no cover - a type without one
        return object
    return float if kind is float else int if kind is int else kind


def _described(columns, pk=()) -> dict[str, tuple]:
    # SQLite reports an INTEGER PRIMARY KEY (the rowid) as nullable; a key never is.
    return {c["name"]: (_kind(c["type"]), bool(c["nullable"]) and c["name"] not in pk) for c in columns}


def test_migrated_tables_match_the_core_definitions(migrated):
    inspector = sa.inspect(migrated)
    for table in tables.metadata.sorted_tables:
        assert table.name in inspector.get_table_names(), f"{table.name}: defined in tables.py, not migrated"
        pk = inspector.get_pk_constraint(table.name)["constrained_columns"]
        migrated = _described(inspector.get_columns(table.name), pk)
        core = {c.name: (_kind(c.type), bool(c.nullable) and not c.primary_key) for c in table.columns}
        assert migrated == core, table.name
        assert sorted(pk) == sorted(c.name for c in table.primary_key.columns), table.name
        # Indexes live in the DDL only; any the Core definitions declare must exist as migrated.
        migrated_indexes = {i["name"]: i["column_names"] for i in inspector.get_indexes(table.name)}
        for index in table.indexes:
            assert migrated_indexes.get(index.name) == [c.name for c in index.columns], (table.name, index.name)


def test_the_comparison_sees_a_difference(engine):
    """The test above can fail: a column added only to the Core definition is noticed."""
    extra = sa.Table("incidents", sa.MetaData(),
                     *(sa.Column(c.name, c.type, nullable=c.nullable, primary_key=c.primary_key)
                       for c in tables.incidents.columns),
                     sa.Column("notes", sa.Text))
    migrated = _described(sa.inspect(engine).get_columns("incidents"))
    assert set({c.name for c in extra.columns}) - set(migrated) == {"notes"}
