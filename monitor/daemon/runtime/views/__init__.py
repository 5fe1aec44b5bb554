"""The daemon's views: what people read of it, built from what the store and the registry hold.
Presentation only; nothing here writes (the stores are read, never changed), so ``driftloop status``
with the daemon stopped and ``GET /v1/status`` give the same answer.

    status.py    ``driftloop status`` and ``GET /v1/status``: collect_status / render_status, one
                 incident's trail (collect_incident / render_incident), ``iso`` timestamps, and
                 public_status (what a caller without the bearer token reads of it)
    render.py    one check as text (``driftloop check``): render_check
    segments.py  the worst segment values of a check, ranked as the segment alert ranks them
    tasks.py     which figures of a check people see, per task (binary, multiclass, regression)
    drifted_rows.py  the rows behind an embedding drift: the status's summary of a check's list

This package is the views' one public entry: other modules import these names from
``monitor.daemon.runtime.views``, not from the modules inside it.
"""
from __future__ import annotations

from monitor.daemon.runtime.views.render import render_check
from monitor.daemon.runtime.views.status import (HIDDEN, collect_incident, collect_status, iso, public_status,
                                                 render_incident, render_status)

__all__ = ["HIDDEN", "collect_incident", "collect_status", "iso", "public_status", "render_check", "render_incident",
           "render_status"]
