"""One schema source: the daemon's tables as its migrations create them (frozen DDL in
monitor/daemon/schema.py) and as its queries see them (SQLAlchemy Core in monitor/daemon/tables.py)
must agree, column by column: name, type, nullability, primary key (issue 14)."""
from __future__ import annotations

import sqlalchemy as sa

from monitor.daemon import tables


def _kind(column_type: sa.types.TypeEngine) -> type:
    try:
        kind = column_type.python_type
    except NotImplementedError:  # pragma: no cover - a type without one
        return object
    return float if kind is float else int if kind is int else kind


def _described(columns, pk=()) -> dict[str, tuple]:
    # SQLite reports an INTEGER PRIMARY KEY (the rowid) as nullable; a key never is.
    return {c["name"]: (_kind(c["type"]), bool(c["nullable"]) and c["name"] not in pk) for c in columns}


def test_migrated_tables_match_the_core_definitions(engine):
    inspector = sa.inspect(engine)
    for table in tables.metadata.sorted_tables:
        assert table.name in inspector.get_table_names(), f"{table.name}: defined in tables.py, not migrated"
        pk = inspector.get_pk_constraint(table.name)["constrained_columns"]
        migrated = _described(inspector.get_columns(table.name), pk)
        core = {c.name: (_kind(c.type), bool(c.nullable) and not c.primary_key) for c in table.columns}
        assert migrated == core, table.name
        assert sorted(pk) == sorted(c.name for c in table.primary_key.columns), table.name


def test_the_comparison_sees_a_difference(engine):
    """The test above can fail: a column added only to the Core definition is noticed."""
    extra = sa.Table("incidents", sa.MetaData(), *(c.copy() for c in tables.incidents.columns),
                     sa.Column("notes", sa.Text))
    migrated = _described(sa.inspect(engine).get_columns("incidents"))
    assert set({c.name for c in extra.columns}) - set(migrated) == {"notes"}
