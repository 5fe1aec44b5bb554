"""The running daemon, the top room: the daemon and its default collaborators (wiring), the check
job, the controller that acts on decisions, the scheduler, leader election, HTTP endpoints, metrics,
triggers and the views (status, render, segments, tasks). May import every room below it."""
