"""The daemon's state in the store: incidents, retrain attempts, the check log, webhook
deliveries (and those a follower holds for the leader), reference levels and the tables and migrations behind them.

Imports only :mod:`monitor.daemon.decisions` of the daemon (and the store) at run time; the check
outcome and webhook alerts it records are handed in (annotations only).

The room's one public entry: what other rooms import from it is listed in ``__all__`` (and can be
imported from the room itself, lazily); ``test_rooms_import_each_other_through_their_entries``
in ``tests/test_layers.py`` holds it.
"""
from __future__ import annotations

from monitor.lazy import lazy_attributes

__all__ = ["AlertInbox", "Attempt", "AttemptStore", "BusyError", "CheckLog", "DeliveryLedger",
           "INBOX_SECONDS", "Incident", "IncidentStore", "Level", "OUTCOMES", "OUTCOME_STATES", "REASONS",
           "ReferenceLevels", "TransitionError", "history_citations", "unsuccessful_in_a_row"]

_WHERE = {
    "AlertInbox": "monitor.daemon.state.inbox", "INBOX_SECONDS": "monitor.daemon.state.inbox",
    "Attempt": "monitor.daemon.state.attempts", "AttemptStore": "monitor.daemon.state.attempts",
    "BusyError": "monitor.daemon.state.attempts", "OUTCOMES": "monitor.daemon.state.attempts",
    "CheckLog": "monitor.daemon.state.checklog", "DeliveryLedger": "monitor.daemon.state.deliveries",
    "Incident": "monitor.daemon.state.incidents", "IncidentStore": "monitor.daemon.state.incidents",
    "OUTCOME_STATES": "monitor.daemon.state.incidents", "REASONS": "monitor.daemon.state.incidents",
    "TransitionError": "monitor.daemon.state.incidents", "Level": "monitor.daemon.state.levels",
    "ReferenceLevels": "monitor.daemon.state.levels", "unsuccessful_in_a_row": "monitor.daemon.state.attempts",
    "history_citations": "monitor.daemon.state.citations",
}

__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
