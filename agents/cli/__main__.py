"""`python -m agents.cli`: the `bullpen` command from a checkout or a venv."""

import sys

from agents.cli import entry

sys.exit(entry())
