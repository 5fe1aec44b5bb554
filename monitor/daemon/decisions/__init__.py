"""Pure decisions: the alert policy, the user's rules, breaches and bars, the daemon's vocabulary
(states, reasons, outcomes), the incident lifecycle table, actions and post-change sizing.

The lowest room: no I/O and no clock of its own (the caller injects one); imports nothing else of the
daemon (``test_decisions_are_pure`` in ``tests/test_layers.py``).

The room's one public entry: what other rooms import from it is listed in ``__all__`` (and can be
imported from the room itself, lazily); ``test_rooms_import_each_other_through_their_entries``
in ``tests/test_layers.py`` holds it.
"""
from __future__ import annotations

from monitor.lazy import lazy_attributes

__all__ = ["Action", "ActionKind", "AlertPolicy", "Attainable", "Breach", "Effect", "Event", "IllegalTransition",
           "OPENING_STATES",
           "OUTCOME_EVENTS", "Observation", "Outcome", "REQUESTED_REASONS", "Reason", "StartKind", "State",
           "TriggerAction", "TriggerKind", "Verdict", "Wait", "WaitKind", "check_rules_fit", "cooldown_remaining",
           "event_to", "exits", "is_performance_reason", "level", "post_change_need", "rule_inputs", "rule_inputs_from",
           "step", "attainable_from", "bar_of", "lower_is_better", "worsening", "baseline_bounds", "own_bar",
           "moved_bar", "selection_shift"]

_WHERE = {
    "Attainable": "monitor.daemon.decisions.attainable", "attainable_from": "monitor.daemon.decisions.attainable",
    "bar_of": "monitor.daemon.decisions.attainable", "lower_is_better": "monitor.daemon.decisions.breach",
    "worsening": "monitor.daemon.decisions.breach", "baseline_bounds": "monitor.daemon.decisions.breach",
    "own_bar": "monitor.daemon.decisions.breach", "moved_bar": "monitor.daemon.decisions.breach",
    "selection_shift": "monitor.daemon.decisions.breach",
    "Action": "monitor.daemon.decisions.actions", "ActionKind": "monitor.daemon.decisions.actions",
    "StartKind": "monitor.daemon.decisions.actions", "TriggerAction": "monitor.daemon.decisions.actions",
    "TriggerKind": "monitor.daemon.decisions.actions", "Wait": "monitor.daemon.decisions.actions",
    "WaitKind": "monitor.daemon.decisions.actions", "Breach": "monitor.daemon.decisions.breach",
    "Observation": "monitor.daemon.decisions.breach", "is_performance_reason": "monitor.daemon.decisions.breach",
    "level": "monitor.daemon.decisions.breach", "OPENING_STATES": "monitor.daemon.decisions.kinds",
    "Outcome": "monitor.daemon.decisions.kinds", "REQUESTED_REASONS": "monitor.daemon.decisions.kinds",
    "Reason": "monitor.daemon.decisions.kinds", "State": "monitor.daemon.decisions.kinds",
    "Effect": "monitor.daemon.decisions.lifecycle", "Event": "monitor.daemon.decisions.lifecycle",
    "IllegalTransition": "monitor.daemon.decisions.lifecycle",
    "OUTCOME_EVENTS": "monitor.daemon.decisions.lifecycle", "event_to": "monitor.daemon.decisions.lifecycle",
    "exits": "monitor.daemon.decisions.lifecycle", "step": "monitor.daemon.decisions.lifecycle",
    "AlertPolicy": "monitor.daemon.decisions.policy", "Verdict": "monitor.daemon.decisions.policy",
    "cooldown_remaining": "monitor.daemon.decisions.policy",
    "post_change_need": "monitor.daemon.decisions.post_change", "check_rules_fit": "monitor.daemon.decisions.rules",
    "rule_inputs": "monitor.daemon.decisions.rules", "rule_inputs_from": "monitor.daemon.decisions.rules",
}

__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
