"""Pure decisions: the alert policy, the user's rules, breach reasons and post-change sizing.

No I/O and no clock of its own (the caller injects one); imports nothing else of the daemon.
"""
