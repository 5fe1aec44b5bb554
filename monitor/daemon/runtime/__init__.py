"""The running daemon, the top room: the daemon and its default collaborators (wiring), the check
job, the controller that acts on decisions, the scheduler, leader election, HTTP endpoints, metrics,
triggers, and the views (``runtime/views/``: status, check render, segments, tasks; presentation
only, imported through ``monitor.daemon.runtime.views``). May import every room below it.

The room's one public entry: what other rooms import from it is listed in ``__all__`` (and can be
imported from the room itself, lazily); ``test_rooms_import_each_other_through_their_entries``
in ``tests/test_layers.py`` holds it.
"""
from __future__ import annotations

from monitor.lazy import lazy_attributes

__all__ = ["CheckOutcome", "CheckReport", "Controller", "Daemon", "WebhookAlert"]

_WHERE = {
    "WebhookAlert": "monitor.daemon.runtime.alertmanager", "CheckOutcome": "monitor.daemon.runtime.checks",
    "CheckReport": "monitor.daemon.runtime.controller", "Controller": "monitor.daemon.runtime.controller",
    "Daemon": "monitor.daemon.runtime.daemon",
}

__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
