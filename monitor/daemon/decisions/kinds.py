"""The daemon's vocabulary, defined once: incident states, incident (breach) reasons and retrain
outcomes.

They are :class:`enum.StrEnum`: a member *is* its string, so what the store holds, what the API
and ``driftloop status`` show and what the metrics label stay the same words; code compares and
dispatches on members, never on sentences. Pure: imports only the bottom layer.
"""
from __future__ import annotations

from enum import StrEnum

from monitor.config import RULE_METRICS


class State(StrEnum):
    """Where an incident is (the table of moves: :mod:`monitor.daemon.decisions.lifecycle`)."""

    SUSPECTED = "suspected"     # an estimated drop, before labels can judge
    FIRING = "firing"           # a check breached; just opened
    WAITING = "waiting"         # a breach stands, a retrain must wait (detail says for what)
    RETRAINING = "retraining"   # a retrain child runs
    SHADOW = "shadow"           # the challenger passed the gate and scores live windows first
    PROMOTED = "promoted"       # the challenger became champion
    REJECTED = "rejected"       # the gate kept the champion
    FAILED = "failed"           # the retrain errored
    RESOLVED = "resolved"       # closed

    @property
    def is_open(self) -> bool:
        return self is not State.RESOLVED

    @property
    def is_outcome(self) -> bool:
        return self in OUTCOME_STATES


OUTCOME_STATES = frozenset({State.PROMOTED, State.REJECTED, State.FAILED})
OPENING_STATES = (State.FIRING, State.SUSPECTED)


class Reason(StrEnum):
    """Why an incident is open: a performance metric that breached (the names of
    ``monitor.config.RULE_METRICS``, accuracy and ROC AUC first: the default pair), data drift, or
    who asked from outside the checks. A per-class rule adds keys such as ``recall[night]``
    (:func:`monitor.daemon.state.incidents.known_reason`)."""

    ACCURACY = "accuracy"
    ROC_AUC = "roc_auc"
    PRECISION = "precision"
    RECALL = "recall"
    F1 = "f1"
    POSITIVE_RATE = "positive_rate"
    MACRO_F1 = "macro_f1"
    WEIGHTED_F1 = "weighted_f1"
    MAE = "mae"
    RMSE = "rmse"
    MAPE = "mape"
    R2 = "r2"
    RESIDUAL_SHIFT = "residual_shift"
    DRIFT = "drift"
    ALERTMANAGER = "alertmanager"
    SCHEDULE = "schedule"
    MANUAL = "manual"
    REVIEW = "review"
    IMPROVE = "improve"  # the champion below the reference level, more evidence since (retraining/improve.py)

    @property
    def is_performance(self) -> bool:
        return self in PERFORMANCE_REASONS


PERFORMANCE_REASONS: tuple[Reason, ...] = tuple(Reason(m) for m in RULE_METRICS)
# Incidents a person or a schedule asked for: resolved when their retrain finishes.
REQUESTED_REASONS = frozenset({Reason.MANUAL, Reason.SCHEDULE, Reason.REVIEW, Reason.IMPROVE})


class Outcome(StrEnum):
    """A retrain attempt's status (table ``retrain_attempts``)."""

    RUNNING = "running"
    PROMOTED = "promoted"
    REJECTED = "rejected"
    FAILED = "failed"
    SHADOW = "shadow"            # held in shadow; settled again as promoted or rejected
    INTERRUPTED = "interrupted"  # its daemon died under it: not a failure of training

    @property
    def unsuccessful(self) -> bool:
        """Counts toward the back-off and escalation."""
        return self in (Outcome.REJECTED, Outcome.FAILED)
