"""Retention's deletes: rows driftloop received before a cutoff, in chunks, each chunk its own
short write transaction so ingestion goes on. Predictions go first, then the labels whose
prediction is no longer stored (the rules are in ``PredictionStore.apply_retention``)."""
from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Callable

from sqlalchemy.engine import Connection, Engine

from monitor.store.engine import driver_sql
from monitor.store.schema import ModelTables


def delete_received_before(engine: Engine, tables: ModelTables, q: Callable[[str], str], cutoff_us: int,
                           chunk_rows: int, writing: Callable[[str], AbstractContextManager[Connection]]) -> int:
    """Rows deleted: predictions received before ``cutoff_us``, then labels received before it
    whose prediction is gone; ``writing(what)`` opens each chunk's write transaction."""
    p, lab = q(tables.predictions.name), q(tables.labels.name)
    statements = (
        (tables.predictions.name,
         f"DELETE FROM {p} WHERE seq IN (SELECT seq FROM {p} WHERE received_at < ? LIMIT ?)"),
        (tables.labels.name,
         f"DELETE FROM {lab} WHERE id IN (SELECT l.id FROM {lab} l WHERE l.received_at < ?"
         f" AND NOT EXISTS (SELECT 1 FROM {p} p WHERE p.id = l.id) LIMIT ?)"),
    )
    total = 0
    for table, statement in statements:  # predictions first: their labels go in the same run
        sql = driver_sql(engine, statement)
        while True:
            with writing(f"retention of {table}") as conn:
                deleted = conn.exec_driver_sql(sql, (cutoff_us, chunk_rows)).rowcount
            total += deleted
            if deleted < chunk_rows:
                break
    return total
