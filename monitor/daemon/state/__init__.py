"""The daemon's state in the store: incidents, retrain attempts, the check log, webhook
deliveries, reference levels and the tables and migrations behind them.

Imports only :mod:`monitor.daemon.decisions` of the daemon (and the store) at run time; the check
outcome and webhook alerts it records are handed in (annotations only)."""
