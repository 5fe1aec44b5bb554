"""The checks the daemon's records cite, whose history (reports, Evidently snapshots) retention
must keep: every incident's, open or resolved, and every retrain's (:mod:`monitor.drift.history`).

An incident cites the reports it names and every check from where its breaching data began
(``window_start``, else when it opened) until it closed, so the Evidently UI shows it whole; a
retrain cites the checks that ran while it did. Incidents and attempts are never pruned, so their
checks stay until someone deletes them by hand.
"""
from __future__ import annotations

import json

from sqlalchemy import select
from sqlalchemy.engine import Engine

from monitor.daemon.decisions.kinds import State
from monitor.daemon.state.tables import incidents, retrain_attempts
from monitor.drift.history import Cited, cited_from


def history_citations(engine: Engine, model: str) -> Cited:
    """What ``model``'s incidents and retrains cite, read in one pass over each table."""
    paths: list[str] = []
    spans: list[tuple[float, float | None]] = []
    with engine.connect() as conn:
        for row in conn.execute(select(incidents.c.report_paths, incidents.c.window_start, incidents.c.opened_at,
                                       incidents.c.resolved_at, incidents.c.updated_at, incidents.c.state)
                                .where(incidents.c.model == model)):
            paths += json.loads(row.report_paths or "[]")
            start = row.opened_at if row.window_start is None else min(row.window_start, row.opened_at)
            # A closed incident without resolved_at (promoted, rejected, failed) closed at its last update.
            end = row.resolved_at or (None if State(row.state).is_open else row.updated_at)
            spans.append((start, end))
        for attempt in conn.execute(select(retrain_attempts.c.started_at, retrain_attempts.c.finished_at)
                                    .where(retrain_attempts.c.model == model)):
            spans.append((attempt.started_at, attempt.finished_at))
    return cited_from(paths, spans, model)
