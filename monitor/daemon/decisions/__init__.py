"""Pure decisions: the alert policy, the user's rules, breaches and bars, the daemon's vocabulary
(states, reasons, outcomes), the incident lifecycle table, actions and post-change sizing.

The lowest room: no I/O and no clock of its own (the caller injects one); imports nothing else of the
daemon (``test_decisions_are_pure`` in ``tests/test_layers.py``).
"""
