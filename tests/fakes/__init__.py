"""Fake models that are real programs, for tests of anything that calls a seat.

    fake_model.py    a `cmd` seat's program: prompt on stdin, scripted answer on stdout
    fake_openai.py   an OpenAI-compatible HTTP server with scripted answers

Both are stdlib-only scripts, run as subprocesses by their path, so they work
whatever the test's import path is. Both pick an answer by the prompt's first
line, `step: X`, from a JSON script mapping step names (or "*") to a list of
answers used in order, or to one answer used every time.
"""

from __future__ import annotations

from pathlib import Path

FAKES = Path(__file__).resolve().parent
FAKE_MODEL = FAKES / "fake_model.py"
FAKE_OPENAI = FAKES / "fake_openai.py"
