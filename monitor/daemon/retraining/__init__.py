"""Retraining: the child process (launcher, worker, supervisor), the MLflow registry as ground
truth, the champion, fail-over settling and the champion review.

Imports :mod:`monitor.daemon.state` and :mod:`monitor.daemon.decisions`; the controller it reports
to is handed in and named for annotations only (one listed exception in ``tests/test_layers.py``:
start-up recovery calls it)."""
