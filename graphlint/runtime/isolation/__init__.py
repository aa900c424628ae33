"""Isolation from the target: one worker subprocess per device (`worker`), and inside it the guard
that times every call into the target, turns its exits into errors and writes its stack on a crash."""
