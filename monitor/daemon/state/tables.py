"""The daemon's own tables in the store, as SQLAlchemy Core definitions for queries.

The DDL that creates them is frozen in :mod:`monitor.daemon.state.schema` (migrations registered with
the store, imported below so that using these tables registers them); these definitions must
match it, and tests/monitor/daemon/test_schema_match.py holds them to it. Times are epoch seconds
(float): portable between SQLite and PostgreSQL and free of the time-zone round trip of
``DateTime`` on SQLite.
"""
from __future__ import annotations

from sqlalchemy import Boolean, Column, Float, Integer, MetaData, String, Table, Text

from monitor.daemon.state import schema as _schema  # noqa: F401  (registers the daemon's migrations)

metadata = MetaData()

check_results = Table(
    "check_results", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("model", String(200), nullable=False),
    Column("ts", Float, nullable=False),                 # when the check ran
    Column("status", String(20), nullable=False),        # ok / no_champion / empty / error
    Column("message", Text, nullable=True),
    Column("champion_version", String(50), nullable=True),
    Column("window_rows", Integer, nullable=False, default=0),
    Column("labelled_rows", Integer, nullable=False, default=0),
    Column("window_start", Float, nullable=True),        # ts of the first/last prediction in the window
    Column("window_end", Float, nullable=True),
    Column("accuracy", Float, nullable=True),
    Column("roc_auc", Float, nullable=True),
    Column("baseline_accuracy", Float, nullable=True),
    Column("baseline_roc_auc", Float, nullable=True),
    Column("drift_share", Float, nullable=True),
    Column("dataset_drift", Boolean, nullable=True),
    Column("duration_seconds", Float, nullable=True),
    Column("report_html", Text, nullable=True),
    Column("report_json", Text, nullable=True),
    Column("verdict", Text, nullable=True),              # the alert policy's message
    Column("result", Text, nullable=True),               # CheckResult.to_dict() as JSON
)

incidents = Table(
    "incidents", metadata,
    Column("id", String(40), primary_key=True),
    Column("model", String(200), nullable=False),
    Column("reason", String(20), nullable=False),        # incidents.REASONS (accuracy, recall, drift, ...)
    Column("trigger", String(20), nullable=False),       # alert / schedule / manual (the MLflow run tag)
    Column("state", String(20), nullable=False),
    Column("detail", Text, nullable=True),
    Column("opened_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("resolved_at", Float, nullable=True),
    Column("check_id", Integer, nullable=True),          # the check that opened it
    Column("report_paths", Text, nullable=True),         # JSON list
    Column("window_start", Float, nullable=True),        # where the breaching data began
    Column("retrain", Boolean, nullable=False, default=True),  # does it ask for a retrain
    Column("attempts", Integer, nullable=False, default=0),
    Column("run_id", String(64), nullable=True),
    Column("version", String(50), nullable=True),        # the challenger version of the last attempt
    Column("outcome_reasons", Text, nullable=True),      # JSON list
    # Migration 3 (schema.incidents_v2):
    Column("change_ts", Float, nullable=True),           # where performance changed (retrain on rows after it)
    Column("reference_accuracy", Float, nullable=True),  # the level of good performance to recover to
    Column("reference_roc_auc", Float, nullable=True),
    Column("escalated", Boolean, nullable=False, default=False),  # stayed unrecovered after alerts.max_attempts tries
    # Migration 5 (schema.incidents_drifted_checks):
    Column("drifted_checks", Integer, nullable=False, default=0),  # drifted checks of its drift episode
    # Migration 6 (schema.incidents_waits_for):
    Column("waits_for", String(20), nullable=True),  # a waiting incident's WaitKind (None: not known, or not waiting)
)

incident_events = Table(
    "incident_events", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("incident_id", String(40), nullable=False),
    Column("ts", Float, nullable=False),
    Column("kind", String(40), nullable=False),
    Column("message", Text, nullable=False),
    Column("data", Text, nullable=True),                 # JSON
)

retrain_attempts = Table(
    "retrain_attempts", metadata,
    Column("id", String(40), primary_key=True),
    Column("model", String(200), nullable=False),
    Column("incident_id", String(40), nullable=False),
    Column("trigger", String(20), nullable=False),
    Column("status", String(20), nullable=False),        # running / promoted / rejected / failed
    Column("started_at", Float, nullable=False),
    Column("finished_at", Float, nullable=True),
    Column("pid", Integer, nullable=True),
    Column("rows", Integer, nullable=True),
    Column("data_window", Text, nullable=True),          # JSON {"start", "end", "rows"}
    Column("run_id", String(64), nullable=True),
    Column("challenger_version", String(50), nullable=True),
    Column("champion_version", String(50), nullable=True),
    Column("duration_seconds", Float, nullable=True),
    Column("samples_per_second", Float, nullable=True),
    Column("reasons", Text, nullable=True),              # JSON list
    Column("error", Text, nullable=True),
)

daemon_counters = Table(
    "daemon_counters", metadata,
    # Tallies of rows removed by retention, so counters derived from the tables never go down.
    Column("model", String(200), primary_key=True),
    Column("name", String(100), primary_key=True),
    Column("value", Float, nullable=False),
)


alert_deliveries = Table(
    "alert_deliveries", metadata,
    Column("model", String(200), primary_key=True),
    Column("fingerprint", String(200), primary_key=True),  # Alertmanager's, or a hash of the labels
    Column("starts_at", String(64), primary_key=True),     # as delivered ('' when absent)
    Column("status", String(20), nullable=False),          # firing / resolved, as last delivered
    Column("first_seen", Float, nullable=False),
    Column("last_seen", Float, nullable=False),
    Column("deliveries", Integer, nullable=False),
    Column("resolved_at", Float, nullable=True),           # when a resolved delivery was first seen
)


alert_inbox = Table(
    "alert_inbox", metadata,
    # Migration 7 (schema.create_alert_inbox): deliveries a follower took for the model's leader.
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("model", String(200), nullable=False),
    Column("received_at", Float, nullable=False),
    Column("payload", Text, nullable=False),              # the webhook payload as JSON (inbox.py)
)
