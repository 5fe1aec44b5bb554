"""The running daemon: the check job, the controller that acts on decisions, the scheduler,
leader election, HTTP endpoints, metrics, triggers and the views (status, render, segments)."""
