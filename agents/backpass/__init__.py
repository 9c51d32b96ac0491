"""The memory backpass: session traces in, ledger lines and memory edits out, on a branch.

Code does everything but two kinds of model call (one bulk analysis per
trace, one synthesis per run); the foreman sequences the steps through
five step nicks. See docs/backpass.md for the operator's view and
agents.backpass.pipeline for the sequence.
"""
