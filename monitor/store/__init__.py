"""The prediction store: predictions keyed by a caller-given id, labels joined by that id, windows as
pandas DataFrames. SQLite file by default, PostgreSQL (or any SQLAlchemy URL) for several replicas.

    store = PredictionStore.from_config(cfg)      # runs migrations, syncs the model's tables
    store.add_predictions(records)                # -> IngestResult(stored, duplicates)
    frame = store.window(last_n=5000, labelled_only=True)
    with state_engine(cfg) as engine: ...         # the deployment's own tables; the model's untouched
"""
from monitor.store.engine import make_engine, write_transaction
from monitor.store.migrations import MIGRATIONS, Migration, migrate, sql
from monitor.store.store import IngestResult, PredictionStore, labelled_window, state_engine

__all__ = ["IngestResult", "MIGRATIONS", "Migration", "PredictionStore", "labelled_window", "make_engine", "migrate",
           "sql", "state_engine", "write_transaction"]
