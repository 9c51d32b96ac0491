"""Replay: the room as a test bench (docs/replay.md).

recorded   a run read back from its thread: its steps, asks and answers
sandbox    the StepContext a replayed step runs in: reads from the record, posts nothing
copy       a private copy of what a file-writing step's ask names, written instead of the run's
shadow     the home such a step sees: the same society, its paths pointed at the copy
gates      whether an answer passes the step's gates (the pipelines' own checks)
rerun      one step asked again through a seat, recorded and replayed side by side
fork       a new run that takes the recorded thread up to a step and carries on
offline    seats answered from the gateway's recording, with no backend
cli        `bullpen replay`
"""
